"""Every provider pydantic-ai supports, as a Tether model (the ``pydantic-ai`` extra).

Example::

    from tether.models.pydantic_ai import PydanticAIModel

    model = PydanticAIModel("openai:gpt-4.1-mini")  # needs OPENAI_API_KEY at the first request
    model = PydanticAIModel(FunctionModel(reply))   # offline, for tests

A model named by a string is built on first use (or by :meth:`PydanticAIModel.build`): the
provider's client, which needs the key, is never made for a replay, which asks no model.
:func:`tether.models.model_from_env` picks one from ``TETHER_MODEL``.

Requests map to pydantic-ai messages and back: text, thinking (with its signature, id and
provider), tool calls and tool results; usage is carried; streamed text and thinking reach
the journal as deltas. Provider errors are classified for Tether's retry policy
(:class:`~tether.models.ModelCallPolicy`): an HTTP error status, a timeout or a connection
error is a :class:`~tether.errors.ProviderError` (a rate limit a
:class:`~tether.errors.ProviderRateLimited`, with the ``Retry-After`` the provider sent), a
full context window is a :class:`~tether.errors.ContextOverflow`, anything else is fatal.
The SDK's own retries are turned off (``max_retries=0``) where the model honours it, since
Tether retries: a request is sent once per try.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai import exceptions as pa_errors
from pydantic_ai import messages as pa
from pydantic_ai.models import Model as PAModel
from pydantic_ai.models import ModelRequestParameters, infer_model
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from tether.errors import (
    ContextOverflow,
    ModelFatalError,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
)
from tether.messages import (
    DataPart,
    FilePart,
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from tether.models._protocol import DeltaSink, StreamDelta
from tether.models._retry import provider_failure

__all__ = (
    "PydanticAIModel",
    "classify_error",
    "complete",
    "from_pydantic_ai",
    "to_pydantic_ai",
)


def _classes(*names: str) -> tuple[type[BaseException], ...]:
    """pydantic-ai's exception classes of these names (an older release lacks some)."""
    return tuple(getattr(pa_errors, name) for name in names if hasattr(pa_errors, name))


_OVERFLOW = _classes("ModelContextWindowExceededError")
_QUOTA = _classes("ModelQuotaExceededError")
_RATE_LIMIT = _classes("ModelRateLimitError")
_TIMEOUT = _classes("ModelTimeoutError", "ModelRequestTimeout")
_UNAVAILABLE = _classes("ModelUnavailableError", "ModelServerError", "ModelConnectionError")


def classify_error(error: BaseException) -> BaseException:
    """The Tether error a pydantic-ai (or transport) failure stands for: a
    :class:`~tether.errors.ProviderError` for what the provider answered (or did not),
    :class:`~tether.errors.ContextOverflow`, else :class:`~tether.errors.ModelFatalError`."""
    text = str(error).lower()
    status = getattr(error, "status_code", None)
    if (_OVERFLOW and isinstance(error, _OVERFLOW)) or (
        isinstance(status, int)
        and status < 500
        and status != 429
        and "context" in text
        and ("length" in text or "window" in text)
    ):
        return ContextOverflow(str(error))
    if _QUOTA and isinstance(error, _QUOTA):  # waiting does not refill a quota
        return ProviderRateLimited(
            "the provider's quota for this account is exhausted",
            status=status if isinstance(status, int) else None,
            retryable=False,
        )
    found = provider_failure(error)
    if found is not None and found.status is not None:
        return found
    # Without a status (an error the provider sent inside a stream, a transport's): the class.
    if _RATE_LIMIT and isinstance(error, _RATE_LIMIT):
        retry_after = getattr(error, "retry_after", None)
        return ProviderRateLimited("the provider rate-limited the request", retry_after=retry_after)
    if _TIMEOUT and isinstance(error, _TIMEOUT):
        return ProviderTimeout("the request to the provider timed out")
    if _UNAVAILABLE and isinstance(error, _UNAVAILABLE):
        return ProviderError(f"the provider failed ({type(error).__name__}: {error})")
    if found is not None:
        return found
    return ModelFatalError(f"{type(error).__name__}: {error}")


class PydanticAIModel:
    """A Tether model over a pydantic-ai model (a ``"provider:model"`` name or an instance).

    A name is resolved (``infer_model``: the provider, its client, its key) on the first
    request, or by :meth:`build`, not here: code that only replays never needs the key."""

    def __init__(
        self,
        model: str | PAModel,
        *,
        settings: ModelSettings | None = None,
        stream: bool | None = None,
    ) -> None:
        self._name = model if isinstance(model, str) else None
        self._model: PAModel | None = None if isinstance(model, str) else model
        self._settings = settings
        self._stream = stream is not False

    @property
    def model_name(self) -> str:
        """The provider's name of the model (``gpt-4.1-mini`` for ``openai:gpt-4.1-mini``)."""
        if self._model is None and self._name is not None:
            return self._name.partition(":")[2] or self._name
        return self.build().model_name

    @property
    def provider(self) -> str | None:
        """The provider it calls, as pydantic-ai names it (``openai-chat`` for
        ``openai-chat:gpt-4.1-mini``): what a trace reports (``gen_ai.provider.name``). Never
        builds the model, so it needs no key."""
        if self._name is not None and ":" in self._name:
            return self._name.partition(":")[0]
        return self._model.system if self._model is not None else None

    def build(self) -> PAModel:
        """The pydantic-ai model, resolved now if it was named: pydantic-ai's own error (an
        unknown provider, a missing package or key) is raised here."""
        if self._model is None:
            assert self._name is not None
            self._model = infer_model(self._name)
        return self._model

    def _resolved(self) -> PAModel:
        """:meth:`build` for a request: a model that cannot be built is a fatal model error
        (retrying would not find the key), and a client made on an event loop that has
        ended is replaced, as pydantic-ai's own agents do at the start of a run."""
        try:
            model = self.build()
        except (pa_errors.UserError, ImportError, ValueError) as exc:
            raise ModelFatalError(f"cannot use the model {self._name}: {exc}") from exc
        refresh = getattr(model, "_refresh_http_client", None)
        if callable(refresh):
            refresh()
        return model

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        model = self._resolved()
        messages = to_pydantic_ai(request.messages)
        parameters = ModelRequestParameters(
            function_tools=[
                ToolDefinition(
                    name=t.name,
                    description=t.description,
                    parameters_json_schema=dict(t.parameters),
                )
                for t in request.tools
            ],
            allow_text_output=True,
        )
        settings = _settings(self._settings, request)
        return await complete(
            model, messages, settings, parameters, stream if self._stream else None
        )


async def complete(
    model: PAModel,
    messages: list[pa.ModelMessage],
    settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    stream: DeltaSink | None = None,
) -> ModelResponse:
    """One pydantic-ai model request as a Tether response: streamed to ``stream`` when given,
    with provider errors classified for Tether's retries, and the SDK's own retries off."""
    settings = _without_sdk_retries(model, settings)
    try:
        # A FunctionModel built without a stream function cannot stream; others can.
        if stream is None or getattr(model, "stream_function", True) is None:
            response = await model.request(messages, settings, parameters)
        else:
            async with model.request_stream(messages, settings, parameters) as streamed:
                async for event in streamed:
                    await _forward(event, stream)
                response = streamed.get()
    except (pa_errors.AgentRunError, TimeoutError, ConnectionError, OSError) as exc:
        raise classify_error(exc) from exc
    return from_pydantic_ai(response)


def _without_sdk_retries(model: PAModel, settings: ModelSettings | None) -> ModelSettings | None:
    """``settings`` with ``max_retries=0``, unless they set it or the model ignores it (and
    would warn): Tether retries a failed call itself, so the SDK's retries (two, for the
    OpenAI, Anthropic and Groq clients) would only multiply its requests."""
    inner = model
    while isinstance(inner, WrapperModel):
        inner = inner.wrapped
    if (settings and "max_retries" in settings) or "max_retries" in inner.unsupported_settings:
        return settings
    return ModelSettings(**{**(settings or {}), "max_retries": 0})


def _settings(base: ModelSettings | None, request: ModelRequest) -> ModelSettings | None:
    merged: dict[str, Any] = dict(base or {})
    for ours, theirs in (
        ("maxTokens", "max_tokens"),
        ("temperature", "temperature"),
        ("topP", "top_p"),
    ):
        if ours in request.settings:
            merged[theirs] = request.settings[ours]
    return ModelSettings(**merged) if merged else None  # type: ignore[typeddict-item]


async def _forward(event: object, stream: DeltaSink) -> None:
    delta = event.delta if isinstance(event, pa.PartDeltaEvent) else None
    part = event.part if isinstance(event, pa.PartStartEvent) else None  # carries the first chunk
    if isinstance(delta, pa.TextPartDelta) and delta.content_delta:
        await stream(StreamDelta("text", delta.content_delta))
    elif isinstance(delta, pa.ThinkingPartDelta) and delta.content_delta:
        await stream(StreamDelta("thinking", delta.content_delta))
    elif isinstance(part, pa.TextPart) and part.content:
        await stream(StreamDelta("text", part.content))
    elif isinstance(part, pa.ThinkingPart) and part.content:
        await stream(StreamDelta("thinking", part.content))


def to_pydantic_ai(messages: Sequence[Message]) -> list[pa.ModelMessage]:
    """Tether messages as pydantic-ai's alternating requests and responses."""
    names = {p.call_id: p.name for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    result: list[pa.ModelMessage] = []
    pending: list[pa.ModelRequestPart] = []
    for message in messages:
        if message.role == "assistant":
            if pending:
                result.append(pa.ModelRequest(parts=pending))
                pending = []
            parts = [
                converted for p in message.parts if (converted := _response_part(p)) is not None
            ]
            result.append(pa.ModelResponse(parts=parts))
        else:
            pending.extend(_request_parts(message, names))
    if pending:
        result.append(pa.ModelRequest(parts=pending))
    return result


def _response_part(part: object) -> pa.ModelResponsePart | None:
    if isinstance(part, TextPart):
        return pa.TextPart(content=part.text)
    if isinstance(part, ThinkingPart):
        details = {"opaque": part.opaque} if part.opaque is not None else None
        return pa.ThinkingPart(
            content=part.text,
            id=part.id,
            signature=part.signature,
            provider_name=part.provider,
            provider_details=details,
        )
    if isinstance(part, ToolCallPart):
        return pa.ToolCallPart(tool_name=part.name, args=dict(part.args), tool_call_id=part.call_id)
    return None


def _request_parts(message: Message, names: dict[str, str]) -> list[pa.ModelRequestPart]:
    parts: list[pa.ModelRequestPart] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            name = part.name or names.get(part.call_id, "tool")
            parts.append(
                pa.ToolReturnPart(tool_name=name, content=part.content, tool_call_id=part.call_id)
            )
        elif message.role == "system":
            parts.append(pa.SystemPromptPart(content=getattr(part, "text", "")))
        elif isinstance(part, TextPart):
            parts.append(pa.UserPromptPart(content=part.text))
        elif isinstance(part, DataPart):
            parts.append(pa.UserPromptPart(content=str(part.data)))
        elif isinstance(part, FilePart):
            parts.append(
                pa.UserPromptPart(content=f"[attachment {part.digest} ({part.media_type})]")
            )
    return parts


def from_pydantic_ai(response: pa.ModelResponse) -> ModelResponse:
    """A pydantic-ai response as Tether's (every part, usage and finish reason; the
    provider's response id and model name, for tracing)."""
    parts: list[TextPart | ThinkingPart | ToolCallPart] = []
    for part in response.parts:
        if isinstance(part, pa.TextPart):
            parts.append(TextPart(text=part.content))
        elif isinstance(part, pa.ThinkingPart):
            details = part.provider_details or {}
            opaque = details.get("opaque") if isinstance(details, dict) else None
            parts.append(
                ThinkingPart(
                    text=part.content,
                    signature=part.signature,
                    id=part.id,
                    provider=part.provider_name,
                    opaque=opaque if isinstance(opaque, str) else None,
                )
            )
        elif isinstance(part, pa.ToolCallPart):
            parts.append(
                ToolCallPart(
                    call_id=part.tool_call_id, name=part.tool_name, args=part.args_as_dict()
                )
            )
    usage = response.usage
    reasoning = getattr(usage, "output_reasoning_tokens", None)
    tokens = Usage(
        input_tokens=getattr(usage, "input_tokens", None),
        output_tokens=getattr(usage, "output_tokens", None),
        reasoning_tokens=reasoning if isinstance(reasoning, int) and reasoning > 0 else None,
        cache_read_tokens=getattr(usage, "cache_read_tokens", None),
        cache_write_tokens=getattr(usage, "cache_write_tokens", None),
    )
    finish = getattr(response, "finish_reason", None)
    response_id = getattr(response, "provider_response_id", None)
    model_name = getattr(response, "model_name", None)
    return ModelResponse(
        message=Message(role="assistant", parts=tuple(parts)),
        usage=tokens,
        finish_reason=str(finish) if finish is not None else None,
        response_id=response_id if isinstance(response_id, str) and response_id else None,
        response_model=model_name if isinstance(model_name, str) and model_name else None,
    )
