"""The journaled Agents SDK ``Model``: every call asks the current Tether turn first."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import AsyncIterator
from typing import Any, cast

from agents import (
    Handoff,
    Model,
    ModelSettings,
    ModelTracing,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Tool,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.items import ModelResponse as SdkResponse
from agents.items import TResponseInputItem, TResponseStreamEvent
from agents.models.multi_provider import MultiProvider
from agents.usage import Usage as SdkUsage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseOutputItemDoneEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam
from openai.types.responses.response_usage import (
    InputTokensDetails,
    OutputTokensDetails,
    ResponseUsage,
)

from tether.integrations._bridge import journaled_model
from tether.integrations.openai_agents._convert import (
    items_to_messages,
    reported,
    response_from_sdk,
    response_to_sdk,
    settings_of,
    tool_specs,
)
from tether.integrations.openai_agents._refuse import server_state
from tether.integrations.openai_agents._scope import Scope, current_scope
from tether.messages import ModelRequest, ModelResponse
from tether.models import DeltaSink, StreamDelta

__all__ = ("JournaledModel",)


class JournaledModel(Model):
    """An Agents SDK ``Model`` whose calls go through the current Tether turn.

    ``inner`` is the real model, or its name (resolved by the SDK's default provider when
    a call actually has to run, so a replay needs no API key).
    """

    def __init__(self, inner: Model | str | None) -> None:
        self._inner = inner
        self.model_name = (
            inner
            if isinstance(inner, str)
            else str(getattr(inner, "model", None) or type(inner).__name__)
            if inner is not None
            else "default"
        )
        self.provider = _provider(inner)
        """The provider the model calls (``openai``, or the one a ``litellm/…`` name routes
        to), for tracing; ``None`` if it cannot be told."""

    def _real(self) -> Model:
        if isinstance(self._inner, Model):
            return self._inner
        self._inner = MultiProvider().get_model(self._inner)
        return self._inner

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> SdkResponse:
        scope = current_scope()
        whole = _whole_input(scope, input, previous_response_id, conversation_id)
        request = ModelRequest(
            model=self.model_name,
            messages=items_to_messages(system_instructions, whole),
            tools=tool_specs(tools, handoffs),
            settings=settings_of(model_settings, output_schema),
        )
        # The provider is sent the whole history and asked to hold nothing: a resume or a
        # replay then never depends on it still holding a response.
        kwargs: dict[str, Any] = {
            "previous_response_id": None,
            "conversation_id": None,
            "prompt": prompt,
        }
        args = (system_instructions, whole, model_settings, tools, output_schema, handoffs, tracing)

        async def native(stream: DeltaSink | None) -> ModelResponse:
            real = self._real()
            with _sdk_retries_off():  # Tether retries the call: the SDK's would multiply it
                if stream is None:
                    return response_from_sdk(await real.get_response(*args, **kwargs))
                streamed, model = await _streamed(real.stream_response(*args, **kwargs), stream)
            return response_from_sdk(streamed).model_copy(update={"response_model": model})

        journaled = await journaled_model(request, native, provider=self.provider)
        response = response_to_sdk(journaled)
        response.response_id = _chain_id(request, journaled)
        if scope is not None:
            scope.responses[response.response_id] = [*_items(whole), *response.to_input_items()]
        return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """The journaled whole response: one ``output_item.done`` per item, then
        ``response.completed`` (the journal streams the live deltas itself)."""
        response = await self.get_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        for index, item in enumerate(response.output):
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done",
                item=item,
                output_index=index,
                sequence_number=index,
            )
        yield ResponseCompletedEvent(
            type="response.completed",
            sequence_number=len(response.output),
            response=Response(
                id=response.response_id or "resp_tether",
                object="response",
                created_at=0,
                model=self.model_name,
                output=response.output,
                parallel_tool_calls=True,
                tool_choice="auto",
                tools=[],
                status="completed",
                usage=_response_usage(response.usage) if reported(response.usage) else None,
            ),
        )


def _whole_input(
    scope: Scope | None,
    input: str | list[TResponseInputItem],
    previous_response_id: str | None,
    conversation_id: str | None,
) -> str | list[TResponseInputItem]:
    """The call's input with what its ``previous_response_id`` continues put back in front,
    from the responses journaled earlier in the run (the SDK then sends only what is new)."""
    if conversation_id:
        raise server_state("conversation_id", conversation_id)
    if not previous_response_id:
        return input
    earlier = None if scope is None else scope.responses.get(previous_response_id)
    if earlier is None:
        raise server_state("previous_response_id", previous_response_id)
    return [*earlier, *_items(input)]


def _chain_id(request: ModelRequest, response: ModelResponse) -> str:
    """The id the SDK is given for a journaled response: the call's, the same live, on
    resume and in replay (the provider's own is not journaled, and never sent back to it)."""
    digest = hashlib.sha256(request.input_hash().encode())
    digest.update(response.message.model_dump_json().encode())
    return f"resp_tether_{digest.hexdigest()[:32]}"


def _items(input: str | list[TResponseInputItem]) -> list[TResponseInputItem]:
    if isinstance(input, str):
        return [cast(TResponseInputItem, {"role": "user", "content": input})]
    return list(input)


def _sdk_retries_off() -> contextlib.AbstractContextManager[None]:
    """The SDK's switch that makes its OpenAI models send each request once (``max_retries=0``,
    as its own runner does when it retries), if this release of the SDK has it."""
    try:
        from agents.models._retry_runtime import provider_managed_retries_disabled
    except ImportError:  # an SDK without the switch: its clients keep their retries
        return contextlib.nullcontext()
    return provider_managed_retries_disabled(True)


def _response_usage(usage: SdkUsage) -> ResponseUsage:
    return ResponseUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        input_tokens_details=usage.input_tokens_details,
        output_tokens_details=usage.output_tokens_details,
    )


def _usage_of(raw: ResponseUsage) -> SdkUsage:
    return SdkUsage(
        requests=1,
        input_tokens=raw.input_tokens,
        output_tokens=raw.output_tokens,
        total_tokens=raw.total_tokens,
        input_tokens_details=InputTokensDetails(
            cached_tokens=raw.input_tokens_details.cached_tokens or 0,
            cache_write_tokens=getattr(raw.input_tokens_details, "cache_write_tokens", 0) or 0,
        ),
        output_tokens_details=OutputTokensDetails(
            reasoning_tokens=raw.output_tokens_details.reasoning_tokens or 0
        ),
    )


def _provider(inner: Model | str | None) -> str | None:
    """Whom the SDK's default provider would call for a name (``gpt-4.1`` and ``openai/…``:
    OpenAI; ``litellm/anthropic/…``: Anthropic), or whom a model instance calls."""
    if inner is None:
        return "openai"  # the SDK's default model
    if isinstance(inner, str):
        head, routed, rest = inner.partition("/")
        if not routed or head == "openai":
            return "openai"
        if head in ("litellm", "any-llm"):
            return rest.partition("/")[0] or None
        return head  # a prefix of the application's own provider map
    if isinstance(inner, OpenAIResponsesModel | OpenAIChatCompletionsModel):
        return "openai"
    name = getattr(inner, "model", None)
    if type(inner).__name__ in ("LitellmModel", "AnyLLMModel") and isinstance(name, str):
        return name.partition("/")[0] if "/" in name else None
    return None


async def _streamed(
    events: AsyncIterator[TResponseStreamEvent], sink: DeltaSink
) -> tuple[SdkResponse, str | None]:
    """Consume a real model's stream: deltas to the journal, the completed response back
    (with the model that answered)."""
    completed: Response | None = None
    try:
        async for event in events:
            if isinstance(event, ResponseTextDeltaEvent) and event.delta:
                await sink(StreamDelta("text", event.delta))
            elif isinstance(event, ResponseReasoningSummaryTextDeltaEvent) and event.delta:
                await sink(StreamDelta("thinking", event.delta, summary=True))
            elif isinstance(event, ResponseReasoningTextDeltaEvent) and event.delta:
                await sink(StreamDelta("thinking", event.delta))
            elif isinstance(event, ResponseCompletedEvent):
                completed = event.response
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    if completed is None:
        raise RuntimeError("the model's stream ended without a response.completed event")
    usage = SdkUsage(requests=1)  # no token counts: reported as None, not 0
    if completed.usage is not None:
        usage = _usage_of(completed.usage)
    response = SdkResponse(output=list(completed.output), usage=usage, response_id=completed.id)
    return response, completed.model or None
