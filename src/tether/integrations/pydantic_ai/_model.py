"""The journaled stand-in for a durable run's pydantic-ai model.

Whichever way the run is driven, every request that reaches the provider goes through the
journal: ``request`` (``agent.run``, ``iter`` node by node) and ``request_stream``
(``run_stream``, ``run_stream_events``, ``node.stream`` inside ``iter``) alike. A streamed
request is journaled as one model call (its text and thinking still stream into the log as
they come) and handed back to pydantic-ai as a stream of the journaled response, so a live
run and its replay see the same events. Token counting is a durable step; the provider
calls the journal cannot stand for (message compaction, batch requests) are refused.

Inside a tool the journal is not entered: what a tool does, another agent's model calls
included, is the tool's own effect, recorded as its outcome.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, NoReturn

from pydantic import JsonValue
from pydantic_ai import messages as pa
from pydantic_ai.models import CompletedStreamedResponse, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from tether import errors
from tether.integrations._bridge import current_turn, journaled_model
from tether.integrations.pydantic_ai._convert import neutral_request, to_response
from tether.messages import ModelResponse
from tether.models import DeltaSink
from tether.models.pydantic_ai import complete

__all__ = (
    "JournaledModel",
    "NotJournaled",
    "UnsupportedConstruct",
    "in_run",
    "in_tool",
    "inside_run",
    "inside_tool",
)

_scope: ContextVar[str | None] = ContextVar("tether_pydantic_ai_scope", default=None)
"""``run`` inside a durable pydantic-ai run, ``tool`` inside one of its tools."""


class NotJournaled(errors.NotJournaled):
    """A durable pydantic-ai run used something the journal cannot record (a realtime
    session, provider-side compaction, a batch request); it fails the run rather than run
    unrecorded, which a resume or a replay would repeat.

    Example::

        # a drive opened agent.realtime("openai-realtime:gpt-realtime").session()
        NotJournaled: realtime sessions stream audio over a provider socket the journal ...
    """


class UnsupportedConstruct(errors.UnsupportedConstruct):
    """A pydantic-ai agent that cannot be a durable Tether agent; raised by ``durable()``,
    ``PydanticAIHarness`` and ``journaled_agent()``, naming the construct.

    Example::

        try:
            durable(Agent("openai:gpt-4o", capabilities=[TemporalDurability()]))
        except UnsupportedConstruct as exc:
            print(exc)  # TemporalDurability: the agent is already made durable by ...
    """


def in_tool() -> bool:
    """Whether this code runs inside a tool of a durable run (the tool's own effect)."""
    return _scope.get() == "tool"


def in_run() -> bool:
    """Whether this code runs inside a durable run, outside its tools."""
    return _scope.get() == "run"


@contextlib.contextmanager
def _inside(scope: str) -> Iterator[None]:
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)


def inside_tool() -> contextlib.AbstractContextManager[None]:
    return _inside("tool")


def inside_run() -> contextlib.AbstractContextManager[None]:
    return _inside("run")


class JournaledModel(WrapperModel):
    """A pydantic-ai model whose requests are the current Tether turn's journaled model calls.

    Example::

        agent.run("hi", model=JournaledModel(agent.model))   # inside a Tether harness
    """

    def _name(self) -> str:
        name = self.wrapped.model_name
        return name if ":" in name else f"{self.wrapped.system}:{name}"

    async def request(
        self,
        messages: list[pa.ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> pa.ModelResponse:
        if in_tool():
            return await self.wrapped.request(messages, model_settings, model_request_parameters)
        wrapped = self.wrapped
        request = neutral_request(self._name(), messages, model_settings, model_request_parameters)

        async def native(stream: DeltaSink | None) -> ModelResponse:
            return await complete(
                wrapped, messages, model_settings, model_request_parameters, stream
            )

        # Live or served, the agent continues from the journaled form: live equals replay.
        response = await journaled_model(request, native, provider=wrapped.system)
        return to_response(response, wrapped.model_name)

    @contextlib.asynccontextmanager
    async def request_stream(
        self,
        messages: list[pa.ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        if in_tool():
            async with self.wrapped.request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as streamed:
                yield streamed
            return
        response = await self.request(messages, model_settings, model_request_parameters)
        # The journaled response, replayed as events: what the run's own consumer reads (its
        # viewers read the live stream from the log).
        yield CompletedStreamedResponse(
            response, model_request_parameters=model_request_parameters, replay_events=True
        )

    async def count_tokens(
        self,
        messages: list[pa.ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> RequestUsage:
        if in_tool():
            return await self.wrapped.count_tokens(
                messages, model_settings, model_request_parameters
            )

        async def count() -> JsonValue:
            usage = await self.wrapped.count_tokens(
                messages, model_settings, model_request_parameters
            )
            return {
                f.name: getattr(usage, f.name)
                for f in dataclasses.fields(usage)
                if isinstance(getattr(usage, f.name), int)
            }

        # A provider's count can change between a run and its replay: the recorded one holds.
        counted = await current_turn().step("pydantic_ai.count_tokens", count)
        fields: dict[str, Any] = dict(counted) if isinstance(counted, dict) else {}
        return RequestUsage(**fields)

    async def compact_messages(
        self, request_context: Any, *, instructions: str | None = None
    ) -> Any:
        if in_tool():
            return await self.wrapped.compact_messages(request_context, instructions=instructions)
        _refuse("provider-side message compaction (compact_messages)")

    async def batch_create(self, requests: Sequence[Any]) -> Any:
        _refuse("batch model requests")

    async def batch_encode(self, request: Any) -> Any:
        _refuse("batch model requests")


def _refuse(what: str) -> NoReturn:
    raise NotJournaled(
        f"{what} cannot be journaled in a durable pydantic-ai run: a resume or a replay would "
        "call the provider again. Remove the capability or setting that asks for it."
    )
