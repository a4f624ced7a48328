"""The pydantic-ai adapter, offline with pydantic-ai's FunctionModel."""

from collections.abc import AsyncIterator, Callable

import pytest
from pydantic_ai import exceptions as pa_errors
from pydantic_ai import messages as pa
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.errors import (
    ContextOverflow,
    ModelFatalError,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
)
from tether.journal import Journal
from tether.messages import (
    Message,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)
from tether.models import StreamDelta
from tether.models.pydantic_ai import (
    PydanticAIModel,
    classify_error,
    from_pydantic_ai,
    to_pydantic_ai,
)
from tether.store import Store

from ..engine.test_runtime import settle

Make = Callable[..., Runtime]


def reply(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    last = messages[-1].parts[-1]
    if isinstance(last, pa.ToolReturnPart):
        return pa.ModelResponse(parts=[pa.TextPart(content=f"the time is {last.content}")])
    assert [t.name for t in info.function_tools] == ["clock"]
    return pa.ModelResponse(
        parts=[
            pa.ThinkingPart(
                content="let me check", signature="sig==", id="rs_1", provider_name="anthropic"
            ),
            pa.ToolCallPart(tool_name="clock", args={"tz": "UTC"}, tool_call_id="t1"),
        ]
    )


async def stream_reply(messages: list[pa.ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    for chunk in ("str", "eam", "ed"):
        yield chunk


@tool
async def clock(tz: str) -> str:
    """The time."""
    return "12:00"


def test_messages_round_trip_through_pydantic_ai_types() -> None:
    messages = (
        Message.system("be brief"),
        Message.user("time?"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="hmm", signature="sig", id="rs", provider="p", opaque="enc"),
                ToolCallPart(call_id="t1", name="clock", args={"tz": "UTC"}),
            ),
        ),
        Message(role="tool", parts=(ToolResultPart(call_id="t1", name="clock", content="12:00"),)),
    )
    converted = to_pydantic_ai(messages)
    assert [type(m).__name__ for m in converted] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
    ]
    back = from_pydantic_ai(converted[1])  # type: ignore[arg-type]
    assert (
        back.message.parts == messages[2].parts
    )  # thinking signature, id, provider and opaque survive


async def test_a_request_and_a_streamed_request() -> None:
    model = PydanticAIModel(FunctionModel(reply))
    response = await model.request(
        ModelRequest(model="m", messages=(Message.user("time?"),), tools=(ToolSpec(name="clock"),))
    )
    [thinking, call] = response.message.parts
    assert (
        isinstance(thinking, ThinkingPart)
        and thinking.signature == "sig=="
        and thinking.provider == "anthropic"
    )
    assert isinstance(call, ToolCallPart) and call.args == {"tz": "UTC"}
    assert response.usage is not None and response.usage.input_tokens is not None
    chunks: list[StreamDelta] = []

    async def sink(delta: StreamDelta) -> None:
        chunks.append(delta)

    streamed = await PydanticAIModel(FunctionModel(stream_function=stream_reply)).request(
        ModelRequest(model="m", messages=(Message.user("hi"),)), sink
    )
    assert streamed.message.parts == (TextPart(text="streamed"),)
    assert [c.text for c in chunks] == ["str", "eam", "ed"]


@pytest.mark.parametrize(
    ("error", "expected", "status", "retryable"),
    [
        (pa_errors.ModelHTTPError(429, "m", "slow down"), ProviderRateLimited, 429, True),
        (pa_errors.ModelHTTPError(503, "m", "overloaded"), ProviderError, 503, True),
        (pa_errors.ModelHTTPError(408, "m", "too slow"), ProviderTimeout, 408, True),
        (pa_errors.ModelHTTPError(401, "m", "bad key"), ProviderError, 401, False),
        (pa_errors.ModelHTTPError(400, "m", "bad tool schema"), ProviderError, 400, False),
        (
            pa_errors.ModelHTTPError(400, "m", "maximum context length exceeded"),
            ContextOverflow,
            0,
            0,
        ),
        (
            pa_errors.ModelRateLimitError("m", "slow down", retry_after=3),
            ProviderRateLimited,
            None,
            True,
        ),
        (pa_errors.ModelQuotaExceededError("m", "no credits"), ProviderRateLimited, None, False),
        (pa_errors.ModelTimeoutError("m", "read"), ProviderTimeout, None, True),
        (pa_errors.ModelConnectionError("m", "reset"), ProviderError, None, True),
        (TimeoutError("read timeout"), ProviderTimeout, None, True),
        (pa_errors.UnexpectedModelBehavior("garbage"), ModelFatalError, 0, 0),
    ],
)
def test_provider_errors_are_classified(
    error: BaseException, expected: type, status: int | None, retryable: bool
) -> None:
    """Only what the provider may get over is retried; a 4xx other than 408, 409 and 429 is
    the request's fault. Errors that are no provider's failure have neither (0 here)."""
    classified = classify_error(error)
    assert type(classified) is expected
    if isinstance(classified, ProviderError):
        assert (classified.status, classified.retryable) == (status, retryable)


def test_a_rate_limit_keeps_the_wait_the_provider_asked_for() -> None:
    limited = classify_error(pa_errors.ModelRateLimitError("m", "slow down", retry_after=3))
    assert isinstance(limited, ProviderRateLimited) and limited.retry_after == 3
    headers = {"Retry-After": "7"}
    http = classify_error(pa_errors.ModelHTTPError(429, "m", "slow", headers=headers))
    assert isinstance(http, ProviderRateLimited) and http.retry_after == 7


async def test_the_sdk_retries_are_off_unless_the_settings_say_otherwise() -> None:
    """Tether retries a failed call itself, so the SDK sends one request per try."""
    seen: list[object] = []

    def answer(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        seen.append((info.model_settings or {}).get("max_retries"))
        return pa.ModelResponse(parts=[pa.TextPart(content="ok")])

    request = ModelRequest(model="m", messages=(Message.user("hi"),))
    await PydanticAIModel(FunctionModel(answer), stream=False).request(request)
    chosen = PydanticAIModel(FunctionModel(answer), settings={"max_retries": 4}, stream=False)
    await chosen.request(request)
    assert seen == [0, 4]


async def test_an_agent_on_pydantic_ai_is_durable(make_runtime: Make, store: Store) -> None:
    spec = agent_spec(PydanticAIModel(FunctionModel(reply)), tools=[clock])
    async with make_runtime({"bot": AgentDefinition(lambda i, e: spec)}) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "what time is it?")
        assert (await settle(runtime, receipt.submission_id))["result"] == "the time is 12:00"
    replayer = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await replayer.replay(spec.harness) == ["the time is 12:00"]
