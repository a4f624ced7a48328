"""The model call policy on its own: which failures are a provider's (read off what the SDKs
raise), how long it waits before another try (the provider's ``Retry-After``, else a jittered
exponential backoff), when it stops, and the timeout that bounds each try and each gap in a
stream. Time is a :class:`ManualClock`: nothing here waits in real time."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import httpx
import httpx2
import openai
import pytest

from tether.engine import ManualClock
from tether.errors import (
    Fenced,
    ModelTransientError,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
)
from tether.models import (
    DEFAULT_MODEL_TIMEOUT,
    ModelCallPolicy,
    ModelConfigError,
    ModelRetryPolicy,
    model_timeout_from_env,
)
from tether.models._retry import provider_failure, retry_after_seconds

from ..engine.test_provider_failures import BackoffClock

REQUEST = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")  # the SDK's client


def openai_status(status: int, headers: dict[str, str] | None = None) -> openai.APIStatusError:
    """What the ``openai`` SDK raises for an error answer (its body: OpenAI's error object)."""
    response = httpx2.Response(status, headers=headers, request=REQUEST)
    body = {"message": "Rate limit reached for gpt-4.1 on tokens per min", "type": "tokens"}
    error_class = openai.RateLimitError if status == 429 else openai.APIStatusError
    return error_class("Error code: 429 - {...}", response=response, body=body)


# --- what is a provider's failure --------------------------------------------------------


def test_an_sdk_status_error_is_read_with_its_retry_after_and_message() -> None:
    failure = provider_failure(openai_status(429, {"retry-after": "2"}))
    assert isinstance(failure, ProviderRateLimited)
    assert (failure.status, failure.retry_after, failure.retryable) == (429, 2.0, True)
    assert str(failure) == (
        "the provider rate-limited the request (HTTP 429): "
        "Rate limit reached for gpt-4.1 on tokens per min"
    )
    millis = provider_failure(openai_status(503, {"retry-after-ms": "1500"}))
    assert millis is not None and millis.retry_after == 1.5 and millis.retryable


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (404, False), (409, True), (500, True)]
)
def test_only_what_the_provider_may_get_over_is_retryable(status: int, retryable: bool) -> None:
    failure = provider_failure(openai_status(status))
    assert failure is not None and (failure.status, failure.retryable) == (status, retryable)


def test_timeouts_and_connection_errors_of_the_sdks_and_their_clients() -> None:
    timeout = provider_failure(openai.APITimeoutError(request=REQUEST))
    assert isinstance(timeout, ProviderTimeout) and timeout.status is None
    dropped = provider_failure(openai.APIConnectionError(request=REQUEST))
    assert type(dropped) is ProviderError and dropped.retryable
    for client in (httpx, httpx2):  # a framework's client may use either
        assert isinstance(provider_failure(client.ReadTimeout("slow")), ProviderTimeout)
        assert type(provider_failure(client.RemoteProtocolError("cut"))) is ProviderError
    wrapped = RuntimeError("the framework's own error")
    wrapped.__cause__ = openai_status(429)
    assert isinstance(provider_failure(wrapped), ProviderRateLimited)


def test_what_is_not_a_providers_failure() -> None:
    assert provider_failure(ValueError("a bug")) is None
    assert provider_failure(Fenced("c", 1, 2)) is None  # Tether's own refusal
    transient = provider_failure(ModelTransientError("overloaded"))
    assert type(transient) is ProviderError and transient.retryable


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT"}, 30.0),
        ({"Retry-After": "Wed, 21 Oct 2026 07:27:00 GMT"}, 0.0),  # already past
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "-1"}, None),
        ({}, None),
    ],
)
def test_retry_after_in_seconds_or_as_a_date(headers: dict[str, str], seconds: float) -> None:
    now = datetime(2026, 10, 21, 7, 28, tzinfo=UTC)
    assert retry_after_seconds(headers, now) == seconds


# --- the waits, and when they stop --------------------------------------------------------


def test_the_wait_is_the_providers_capped_else_exponential_with_jitter() -> None:
    policy = ModelRetryPolicy(retries=5, max_elapsed=1000, max_retry_after=60)
    limited = ProviderRateLimited("429", status=429, retry_after=2)
    assert policy.delay(limited, tries=1, elapsed=0, jitter=0.9) == 2
    far = ProviderRateLimited("429", status=429, retry_after=3600)
    assert policy.delay(far, tries=1, elapsed=0, jitter=0.9) == 60
    server = ProviderError("500", status=500)
    assert [policy.delay(server, n, 0, jitter=0) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert [policy.delay(server, n, 0, jitter=1) for n in (1, 2, 6)] == [1.0, 2.0, None]
    capped = ModelRetryPolicy(retries=20, max_elapsed=1000, max_delay=30)
    assert capped.delay(server, 10, 0, jitter=1) == 30


def test_no_retry_past_the_count_the_time_or_for_a_refused_request() -> None:
    policy = ModelRetryPolicy(retries=2, max_elapsed=10)
    limited = ProviderRateLimited("429", status=429, retry_after=4)
    assert policy.delay(limited, tries=2, elapsed=6, jitter=0) == 4  # ends at 10: allowed
    assert policy.delay(limited, tries=2, elapsed=6.5, jitter=0) is None  # would end past 10
    assert policy.delay(limited, tries=3, elapsed=0, jitter=0) is None  # count spent
    refused = ProviderError("400", status=400)
    assert policy.delay(refused, tries=1, elapsed=0, jitter=0) is None


@pytest.mark.parametrize(
    "settings",
    [{"retries": -1}, {"max_elapsed": -1.0}, {"first_delay": math.nan}, {"max_delay": -0.1}],
)
def test_a_policy_that_makes_no_sense_is_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be 0 or more"):
        ModelRetryPolicy(**settings)  # type: ignore[arg-type]


def test_a_timeout_of_no_time_is_refused() -> None:
    with pytest.raises(ValueError, match="more than 0 seconds"):
        ModelCallPolicy(timeout=0)


# --- the call ------------------------------------------------------------------------------


def answers(*outcomes: BaseException | str) -> Callable[[Callable[[], None]], Awaitable[str]]:
    """An attempt that raises or returns each outcome in turn; counts its tries."""
    remaining = list(outcomes)

    async def attempt(touch: Callable[[], None]) -> str:
        outcome = remaining.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return attempt


async def test_a_call_is_retried_after_the_waits_asked_of_the_clock() -> None:
    clock = BackoffClock()
    policy = ModelCallPolicy(retry=ModelRetryPolicy(retries=3), clock=clock)
    attempt = answers(openai_status(429, {"retry-after": "2"}), openai_status(429), "answer")
    assert await policy.call(attempt) == "answer"
    assert clock.slept[0] == 2.0 and 1.0 <= clock.slept[1] <= 2.0  # 2nd: no Retry-After


async def test_a_spent_budget_raises_the_last_failure_with_the_requests_made() -> None:
    clock = BackoffClock()
    policy = ModelCallPolicy(retry=ModelRetryPolicy(retries=2), clock=clock)
    with pytest.raises(ProviderRateLimited) as raised:
        await policy.call(answers(*[openai_status(429, {"retry-after": "1"})] * 3))
    assert raised.value.tries == 3 and raised.value.details == {"status": 429, "tries": 3}
    assert "gave up after 3 requests" in str(raised.value)
    assert clock.slept == [1.0, 1.0]


async def test_a_refused_request_and_what_is_no_providers_failure_are_not_retried() -> None:
    clock = BackoffClock()
    policy = ModelCallPolicy(clock=clock)
    with pytest.raises(ProviderError, match="not retried") as raised:
        await policy.call(answers(openai_status(400), "never"))
    assert raised.value.details == {"status": 400, "tries": 1}
    with pytest.raises(ValueError, match="a bug"):
        await policy.call(answers(ValueError("a bug"), "never"))
    assert clock.slept == []


async def test_the_timeout_bounds_a_try_and_each_gap_between_chunks() -> None:
    clock = ManualClock()
    policy = ModelCallPolicy(timeout=10, retry=ModelRetryPolicy(retries=0), clock=clock)
    started, chunk, touched = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def streaming(touch: Callable[[], None]) -> str:
        started.set()  # the try's timer is set before it starts
        await chunk.wait()  # a chunk comes 8 s in: the timeout counts again from it
        touch()
        touched.set()
        await asyncio.Event().wait()  # then nothing more
        return "never"

    call = asyncio.create_task(policy.call(streaming))
    async with asyncio.timeout(30):
        await started.wait()
        await clock.advance(8)
        chunk.set()
        await touched.wait()
    await clock.advance(8)  # 16 s in, 8 s since the chunk: still within it
    assert not call.done()
    await clock.advance(2)  # 10 s since the chunk
    with pytest.raises(ProviderTimeout, match="sent nothing for 10 s") as raised:
        await call
    assert raised.value.tries == 1 and "gave up after 1 request " in str(raised.value)
    assert clock.pending == 0  # its timer was taken back


async def test_without_a_clock_the_timeout_is_the_event_loops() -> None:
    policy = ModelCallPolicy(timeout=0.05, retry=ModelRetryPolicy(retries=0))

    async def hangs(touch: Callable[[], None]) -> str:
        await asyncio.Event().wait()
        return "never"

    with pytest.raises(ProviderTimeout):
        await policy.call(hangs)


# --- the setting -------------------------------------------------------------------------


def test_the_timeout_from_the_environment() -> None:
    assert model_timeout_from_env({}) == DEFAULT_MODEL_TIMEOUT == 300
    assert model_timeout_from_env({"TETHER_MODEL_TIMEOUT": " 45 "}) == 45
    assert model_timeout_from_env({"TETHER_MODEL_TIMEOUT": "inf"}) == math.inf
    for bad in ("0", "-3", "nan", "later"):
        with pytest.raises(ModelConfigError, match=f"TETHER_MODEL_TIMEOUT={bad}: not a number"):
            model_timeout_from_env({"TETHER_MODEL_TIMEOUT": bad})
