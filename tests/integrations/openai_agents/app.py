"""A scripted Agents SDK agent, served by ``tether serve --app`` in the crash tests.

The model appends one line per call (a hash of its input) to ``TETHER_TEST_OA_MODEL_LOG``
when set, so a test can prove a recorded model call was never requested again.
``get_weather`` sleeps ``TETHER_TEST_OA_TOOL_SECONDS`` so a SIGKILL lands mid-tool.
"""

import asyncio
import json
import os
from typing import Any

from agents import Agent, Model, function_tool
from agents.items import TResponseOutputItem

from tether.engine import AgentDefinition
from tether.integrations.openai_agents import durable

from .scripted import ScriptedModel, call, text


def script(items: list[dict[str, Any]]) -> list[TResponseOutputItem]:
    """weather X → get_weather; email X → send_email; break → broken; then answer."""
    users = [i for i in items if i.get("role") == "user"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    last = items[-1]
    if last.get("type") == "function_call_output":
        return [text(f"done: {last['output']}")]
    prompt = str(users[-1]["content"]) if users else ""
    call_id = f"call_{len(users)}_{len(outputs)}"
    if prompt.startswith("weather"):
        args = {"city": prompt.removeprefix("weather").strip()}
        return [text("on it"), call("get_weather", json.dumps(args), call_id)]
    if prompt.startswith("email"):
        args = {"to": "bob@example.com", "body": prompt.removeprefix("email").strip()}
        return [call("send_email", json.dumps(args), call_id)]
    if prompt.startswith("break"):
        return [call("broken", "{}", call_id)]
    return [text(f"you said: {prompt}")]


def make_agent(model: Model | None = None) -> Agent[Any]:
    @function_tool
    async def get_weather(city: str) -> str:
        """The weather in a city."""
        await asyncio.sleep(float(os.environ.get("TETHER_TEST_OA_TOOL_SECONDS", "0")))
        return f"sunny in {city}"

    @function_tool(needs_approval=True)
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        return f"sent to {to}: {body}"

    @function_tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("boom")

    return Agent(
        name="helper",
        instructions="Be helpful.",
        model=model or ScriptedModel(script),
        tools=[get_weather, send_email, broken],
    )


def agents() -> dict[str, AgentDefinition]:
    return {"helper": durable(make_agent(), idempotent_tools=["get_weather"])}
