"""The demo's keyless model: the echo model, and delegation to the researcher when asked."""

from __future__ import annotations

import re

from pydantic import JsonValue

from tether.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolResultPart,
)
from tether.models import DeltaSink, EchoModel

__all__ = ("DemoModel", "delegated_topics")

TASK = "task"
RESEARCHER = "researcher"

_ASK = re.compile(r"^\s*ask\s+the\s+researcher\s+about\s+(.+)$", re.IGNORECASE | re.DOTALL)
_AND_ABOUT = re.compile(r"\s*(?:,\s*and\b|,|\band\b)\s+about\s+", re.IGNORECASE)


def delegated_topics(text: str) -> list[str]:
    """The topics ``ask the researcher about A and about B`` names (none for other text).

    Example::

        delegated_topics("ask the researcher about tides and about the moon?")
        # ["tides", "the moon"]
    """
    asked = _ASK.match(text)
    if asked is None:
        return []
    topics = (topic.strip().rstrip("?.!").strip() for topic in _AND_ABOUT.split(asked.group(1)))
    return [topic for topic in topics if topic]


class DemoModel:
    """Deterministic, offline, streaming: :class:`~tether.models.EchoModel`, plus delegation.

    Offered the ``task`` tool, ``ask the researcher about <topic>`` calls it once, with
    ``research <topic>`` for the ``researcher`` (whose model calls its slow ``research``
    tool); ``... about <a> and about <b>`` calls it once per topic, in one response, so the
    children run in parallel. With the children's answers it reports each one. Anything
    else is the echo model's.
    """

    def __init__(self, *, chunk: int = 4, delay: float = 0.0) -> None:
        self.echo = EchoModel(chunk=chunk, delay=delay)

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        batch = _latest_batch(request.messages)
        if batch and all(call.name == TASK for call in batch):
            message = Message.assistant(_report(request.messages, batch))
        elif batch is None and (topics := self._delegation(request)):
            message = _delegate(topics, len(request.messages))
        else:
            return await self.echo.request(request, stream)
        return await self.echo.respond(request, message, stream)

    @staticmethod
    def _delegation(request: ModelRequest) -> list[str]:
        """The topics to hand to the researcher: only if the task tool is offered, names it,
        and the latest message asks for it."""
        offered = next((tool for tool in request.tools if tool.name == TASK), None)
        if offered is None or RESEARCHER not in _task_agents(offered.parameters):
            return []
        last = request.messages[-1] if request.messages else Message.user("")
        return delegated_topics(last.text) if last.role == "user" else []


def _task_agents(parameters: JsonValue) -> list[JsonValue]:
    """The agents a task tool's parameters schema lets the model name."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    agent = properties.get("agent") if isinstance(properties, dict) else None
    names = agent.get("enum") if isinstance(agent, dict) else None
    return names if isinstance(names, list) else []


def _latest_batch(messages: tuple[Message, ...]) -> list[ToolCallPart] | None:
    """The tool calls of the model's last move, if the results (and maybe steers) followed
    it; ``None`` if the model is not answering tool results."""
    for message in reversed(messages):
        if message.role == "assistant":
            calls = [part for part in message.parts if isinstance(part, ToolCallPart)]
            return calls or None
        if message.role not in ("tool", "user"):
            return None
    return None


def _delegate(topics: list[str], position: int) -> Message:
    parts = tuple(
        ToolCallPart(
            call_id=f"call-{position}-{index}",
            name=TASK,
            args={"agent": RESEARCHER, "prompt": f"research {topic}"},
        )
        for index, topic in enumerate(topics, 1)
    )
    return Message(role="assistant", parts=parts)


def _report(messages: tuple[Message, ...], batch: list[ToolCallPart]) -> str:
    """The answer once the children have answered: each child's, by topic, in call order,
    and any steer that came in meanwhile."""
    results: dict[str, ToolResultPart] = {}
    steers: list[str] = []
    answered = len(messages) - next(
        i for i, message in enumerate(reversed(messages)) if message.role == "assistant"
    )
    for message in messages[answered:]:  # the results, and the steers among them
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                results[part.call_id] = part
        if message.role == "user":
            steers.append(message.text)
    lines = []
    for call in batch:
        prompt = str(call.args.get("prompt", ""))
        topic = prompt.removeprefix("research ").strip() or prompt
        result = results.get(call.call_id)
        if result is None:
            lines.append(f"The researcher did not answer on {topic}.")
        elif result.is_error:
            lines.append(f"The researcher could not finish on {topic}: {result.content}")
        else:
            lines.append(f"The researcher says, on {topic}: {result.content}")
    if steers:
        lines.append("You also told me: " + " / ".join(steers) + ".")
    return "\n".join(lines)
