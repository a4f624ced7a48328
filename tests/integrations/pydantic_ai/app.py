"""A scripted pydantic-ai agent, served by ``tether serve --app`` in the crash tests.

The model is a ``FunctionModel`` that appends one line per call to ``TETHER_TEST_MODEL_LOG``
(when set), so a test can prove a recorded model call was never requested again.
``research`` sleeps ``TETHER_TEST_TOOL_SECONDS`` so a SIGKILL lands mid-tool.
``TETHER_TEST_DRIVE`` names the way the harness runs the agent (a key of :data:`DRIVES`).
"""

import asyncio
import os
from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent, ModelRetry
from pydantic_ai import messages as pa
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.run import AgentRunResultEvent

from tether.engine import AgentDefinition
from tether.integrations.pydantic_ai import Drive, JournaledAgent, durable

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
    elif prompt.startswith("look up"):  # no text before the call: a stream's output is last
        topic = prompt.removeprefix("look up").strip()
        call = pa.ToolCallPart("research", {"topic": topic}, tool_call_id=call_id)
        return pa.ModelResponse(parts=[call])
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


async def by_run(agent: JournaledAgent, prompt: str, history: list[pa.ModelMessage]) -> Any:
    return (await agent.run(prompt, message_history=history)).output


async def by_iter(agent: JournaledAgent, prompt: str, history: list[pa.ModelMessage]) -> Any:
    async with agent.iter(prompt, message_history=history) as run:
        async for _ in run:
            pass
    assert run.result is not None
    return run.result.output


async def by_node_streams(
    agent: JournaledAgent, prompt: str, history: list[pa.ModelMessage]
) -> Any:
    """``iter``, streaming each model request and tool batch node by node."""
    async with agent.iter(prompt, message_history=history) as run:
        async for node in run:
            if Agent.is_model_request_node(node) or Agent.is_call_tools_node(node):
                async with node.stream(run.ctx) as events:
                    async for _ in events:
                        pass
    assert run.result is not None
    return run.result.output


async def by_run_stream(agent: JournaledAgent, prompt: str, history: list[pa.ModelMessage]) -> Any:
    async with agent.run_stream(prompt, message_history=history) as result:
        text = "".join([delta async for delta in result.stream_text(delta=True)])
        output = await result.get_output()
    assert text == output
    return output


async def by_run_stream_events(
    agent: JournaledAgent, prompt: str, history: list[pa.ModelMessage]
) -> Any:
    output: Any = None
    async with agent.run_stream_events(prompt, message_history=history) as events:
        async for event in events:
            if isinstance(event, AgentRunResultEvent):
                output = event.result.output
    return output


DRIVES: dict[str, Drive] = {
    "run": by_run,
    "iter": by_iter,
    "iter-node-streams": by_node_streams,
    "run_stream": by_run_stream,
    "run_stream_events": by_run_stream_events,
}


def agents() -> dict[str, AgentDefinition]:
    drive = DRIVES[os.environ.get("TETHER_TEST_DRIVE", "run")]
    return {"helper": durable(make_agent(), idempotent_tools=["research"], drive=drive)}
