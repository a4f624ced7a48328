"""A scripted pydantic-ai agent, served by ``tether serve --app`` in the crash tests.

The model is a ``FunctionModel`` that appends one line per call to ``TETHER_TEST_MODEL_LOG``
(when set), so a test can prove a recorded model call was never requested again.
``research`` sleeps ``TETHER_TEST_TOOL_SECONDS`` so a SIGKILL lands mid-tool.
"""

import asyncio
import os
from collections.abc import Callable

from pydantic_ai import Agent, ModelRetry
from pydantic_ai import messages as pa
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tether.engine import AgentDefinition
from tether.integrations.pydantic_ai import durable

Reply = Callable[[list[pa.ModelMessage], AgentInfo], pa.ModelResponse]


def _prompt(messages: list[pa.ModelMessage]) -> str:
    for message in reversed(messages):
        for part in message.parts:
            if isinstance(part, pa.UserPromptPart) and isinstance(part.content, str):
                return part.content
    return ""


def script(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    """research X → call research; email → call send_email; fail → call flaky; then answer."""
    log = os.environ.get("TETHER_TEST_MODEL_LOG")
    if log:
        with open(log, "a") as out:
            out.write(f"{len(messages)}\n")
    last = messages[-1]
    returned = [p for p in last.parts if isinstance(p, pa.ToolReturnPart)]
    call_id = f"call-{len(messages)}"
    if returned and returned[-1].outcome == "retried":
        again = pa.ToolCallPart(returned[-1].tool_name, {}, tool_call_id=call_id)
        return pa.ModelResponse(parts=[again])
    if returned:
        return pa.ModelResponse(parts=[pa.TextPart(f"done: {returned[-1].model_response_str()}")])
    prompt = _prompt(messages)
    if prompt.startswith("email"):
        args = {"to": "bob@example.com", "text": prompt.removeprefix("email").strip()}
        call = pa.ToolCallPart("send_email", args, tool_call_id=call_id)
    elif prompt.startswith("fail"):
        call = pa.ToolCallPart("flaky", {}, tool_call_id=call_id)
    elif prompt.startswith("research"):
        topic = prompt.removeprefix("research").strip()
        call = pa.ToolCallPart("research", {"topic": topic}, tool_call_id=call_id)
    else:
        return pa.ModelResponse(parts=[pa.TextPart(f"you said: {prompt}")])
    return pa.ModelResponse(parts=[pa.TextPart("on it"), call])


def make_agent(model: Model | None = None) -> Agent[None, str]:
    agent = Agent(model or FunctionModel(script, model_name="scripted"), name="helper")
    tries: dict[str, int] = {}

    @agent.tool_plain
    async def research(topic: str) -> str:
        await asyncio.sleep(float(os.environ.get("TETHER_TEST_TOOL_SECONDS", "0")))
        return f"three facts about {topic}"

    @agent.tool_plain(requires_approval=True)
    async def send_email(to: str, text: str) -> str:
        return f"sent to {to}: {text}"

    @agent.tool_plain(retries=2)
    async def flaky() -> dict[str, int]:
        tries["flaky"] = tries.get("flaky", 0) + 1
        if tries["flaky"] == 1:
            raise ModelRetry("try again")
        return {"attempts": tries["flaky"]}

    return agent


def agents() -> dict[str, AgentDefinition]:
    return {"helper": durable(make_agent(), idempotent_tools=["research"])}
