"""The built-in agent loop: model → tools (in parallel) → model …, until a text-only answer.

Every model call and tool call goes through the turn, so the loop is durable at each step:
a crash resumes it from the journal, a replay re-runs it with zero model calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar
from xml.sax.saxutils import escape, quoteattr

from pydantic import JsonValue

from tether.agent._toolbox import Toolbox
from tether.agent._tools import Tool
from tether.engine import AgentSpec
from tether.errors import JournalError
from tether.journal import Turn
from tether.journal._history import SIGNAL_MEDIA_TYPE
from tether.messages import DataPart, Mediation, Message, ModelRequest, TextPart, ToolCall
from tether.models import Model

__all__ = ("Agent", "AgentLoopError", "agent_spec", "render_signal")

T = TypeVar("T")
SUMMARY_PROMPT = (
    "Summarize the conversation so far for your own later use: the user's goals, the facts "
    "established, the decisions made, and anything still open. Be concise and complete."
)


class AgentLoopError(JournalError):
    """The model kept calling tools past the round limit."""

    code = "agent_loop_exhausted"


def render_signal(data: JsonValue) -> str:
    """A signal as the model sees it: ``<signal type="..." sender-x="...">body</signal>``."""
    fields = data if isinstance(data, dict) else {}
    attributes = f" type={quoteattr(str(fields.get('type', '')))}"
    sender = fields.get("sender")
    if isinstance(sender, dict):
        attributes += "".join(
            f" sender-{key}={quoteattr(str(value))}" for key, value in sender.items()
        )
    if fields.get("tag"):
        attributes += f" tag={quoteattr(str(fields['tag']))}"
    return f"<signal{attributes}>{escape(str(fields.get('body', '')))}</signal>"


def _render(messages: Sequence[Message]) -> list[Message]:
    """Signals become text the model reads; everything else passes as it is."""
    rendered = []
    for message in messages:
        if any(
            isinstance(p, DataPart) and p.media_type == SIGNAL_MEDIA_TYPE for p in message.parts
        ):
            parts = tuple(
                TextPart(text=render_signal(p.data))
                if isinstance(p, DataPart) and p.media_type == SIGNAL_MEDIA_TYPE
                else p
                for p in message.parts
            )
            message = Message(role=message.role, parts=parts)
        rendered.append(message)
    return rendered


class Agent:
    """The built-in harness. ``model`` names the model in requests (the client is the spec's).

    Example::

        Agent(model="openai:gpt-4o", system_prompt="You are terse.", tools=[weather])
    """

    name = "tether.agent"
    version = "1"

    def __init__(
        self,
        *,
        model: str = "default",
        system_prompt: str | None = None,
        tools: Sequence[Tool] = (),
        max_rounds: int = 25,
        max_tokens: int | None = None,
        settings: dict[str, JsonValue] | None = None,
    ) -> None:
        self.model = model
        self.system_prompt = system_prompt
        self.tools = {t.name: t for t in tools}
        self.max_rounds = max_rounds
        self.settings = dict(settings or {})
        if max_tokens is not None:
            self.settings["maxTokens"] = max_tokens

    def _request(
        self, messages: Sequence[Message], config: dict[str, JsonValue] | None
    ) -> ModelRequest:
        system = (Message.system(self.system_prompt),) if self.system_prompt else ()
        settings = dict(self.settings)
        if config and "resultSchema" in config:
            settings["resultSchema"] = config["resultSchema"]
        return ModelRequest(
            model=self.model,
            messages=(*system, *messages),
            tools=tuple(t.spec for t in self.tools.values()),
            settings=settings,
        )

    async def run(self, turn: Turn) -> JsonValue:
        messages = _render([*turn.history, *turn.inputs])
        for _ in range(self.max_rounds):
            response = await turn.model(self._request(messages, turn.config))
            messages.append(response.message)
            calls = response.message.tool_calls
            if calls:
                results = await _all(
                    turn.tool(
                        ToolCall(
                            call_id=part.call_id,
                            name=part.name,
                            args=part.args,
                            # From recorded values: a replay or a resume derives the same key.
                            idempotency_key=f"{turn.execution_id}:{part.call_id}",
                            mediation=self.tools[part.name].spec.mediation
                            if part.name in self.tools
                            else Mediation.HOST,
                            idempotent=part.name in self.tools and self.tools[part.name].idempotent,
                        )
                    )
                    for part in calls
                )
                messages += [
                    Message(role="tool", parts=(result.to_part(part.name),))
                    for part, result in zip(calls, results, strict=True)
                ]
                messages += _render(await turn.steering(("steer",)))
                continue
            follow_ups = _render(await turn.steering(("follow_up",)))
            if follow_ups:
                messages += follow_ups
                continue
            return response.message.text
        raise AgentLoopError(f"no final answer after {self.max_rounds} model calls")


async def _all(calls: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Run a tool batch in parallel; the first failure (a park, say) is what surfaces."""
    try:
        async with asyncio.TaskGroup() as group:
            running = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in running]


def agent_spec(
    model: Model,
    *,
    model_name: str = "default",
    system_prompt: str | None = None,
    tools: Sequence[Tool] = (),
    max_rounds: int = 25,
    max_tokens: int | None = None,
) -> AgentSpec:
    """An engine spec running the built-in agent, with ``model`` as the client and a summarizer
    (for queued compaction) that asks the same model.

    Example::

        AgentDefinition(lambda instance, env: agent_spec(EchoModel(), tools=[clock]))
    """

    async def summarize(messages: list[Message]) -> str:
        request = ModelRequest(model=model_name, messages=(*messages, Message.user(SUMMARY_PROMPT)))
        return (await model.request(request)).message.text

    harness = Agent(
        model=model_name,
        system_prompt=system_prompt,
        tools=tools,
        max_rounds=max_rounds,
        max_tokens=max_tokens,
    )
    return AgentSpec(harness=harness, model=model, tools=Toolbox(tools), summarize=summarize)
