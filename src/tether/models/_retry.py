"""One policy for a model call that fails: a timeout on each try, and retries within the call.

A model call has no side effect, so trying it again is safe; the journal records only the
answer that comes. Each try is bounded by the timeout, counted from the try's start and again
from each streamed chunk (a stream can hang half-way). A failure the provider may get over
(a rate limit, a timeout, a 5xx, a connection that failed or dropped, 408 and 409) is tried
again after a backoff: the provider's ``Retry-After`` when it gives one, else exponential with
jitter. The retries stop when the policy's count or time is spent, or at once for a request
the provider refused (any other 4xx); the call then raises the last failure, a
:class:`~tether.errors.ProviderError` saying how many requests were made.

Example::

    policy = ModelCallPolicy(timeout=60, retry=ModelRetryPolicy(retries=3, max_elapsed=30))
    response = await policy.call(lambda touch: model.request(request))
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

from tether.errors import (
    ModelTransientError,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    TetherError,
)

__all__ = (
    "DEFAULT_MODEL_TIMEOUT",
    "ModelCallPolicy",
    "ModelRetryPolicy",
    "RetryClock",
    "provider_failure",
    "retry_after_seconds",
)

logger = logging.getLogger("tether.models")

DEFAULT_MODEL_TIMEOUT: Final = 300.0
"""Seconds a model call's try may go without a byte of its answer (``TETHER_MODEL_TIMEOUT``)."""

_T = TypeVar("_T")
Touch = Callable[[], None]
"""Called by a try for each chunk it receives: the timeout counts from the latest."""

# Exception classes, by name, of the provider SDKs and their HTTP clients (openai, anthropic
# and groq's APITimeoutError and APIConnectionError; httpx's TimeoutException and
# TransportError), so that a framework's own client is classified without importing it.
_TIMEOUTS: Final = frozenset({"APITimeoutError", "TimeoutException"})
_CONNECTIONS: Final = frozenset({"APIConnectionError", "TransportError"})
_DETAIL_CHARS: Final = 200
"""How much of the provider's own error message a failure quotes."""


class RetryClock(Protocol):
    """What measures a call's retries: the engine's :class:`~tether.engine.Clock` is one.
    A clock that also offers ``call_later(seconds, callback)`` (returning something with a
    ``cancel()``), as the engine's system and manual clocks do, measures the timeout too."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class _Cancellable(Protocol):
    def cancel(self) -> object: ...


@runtime_checkable
class _Timers(Protocol):
    def monotonic(self) -> float: ...

    def call_later(self, seconds: float, callback: Callable[[], None]) -> _Cancellable: ...


_ClockTimers = tuple[Callable[[], float], Callable[[float, Callable[[], None]], _Cancellable]]


@dataclass(frozen=True, slots=True)
class ModelRetryPolicy:
    """How often, and for how long, a failed model call is tried again within the call.

    ``retries`` more requests at most (so ``retries + 1`` in all), none starting past
    ``max_elapsed`` seconds after the first. The wait before each is the provider's
    ``Retry-After`` (capped at ``max_retry_after``), else ``first_delay`` doubled per retry up
    to ``max_delay``, times a random factor between 0.5 and 1 (so that many calls refused at
    once do not come back at once).

    Example::

        AgentSpec(harness=..., model_retry=ModelRetryPolicy(retries=2, max_elapsed=30))
    """

    retries: int = 5
    max_elapsed: float = 120.0
    first_delay: float = 1.0
    max_delay: float = 30.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries must be 0 or more, not {self.retries}")
        for name in ("max_elapsed", "first_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if not value >= 0:  # NaN too
                raise ValueError(f"{name} must be 0 or more seconds, not {value}")

    def delay(
        self, failure: ProviderError, tries: int, elapsed: float, jitter: float
    ) -> float | None:
        """The wait before another request, after ``tries`` of them and ``elapsed`` seconds,
        or ``None`` if no other is made. ``jitter`` is uniform in [0, 1)."""
        if not failure.retryable or tries > self.retries:
            return None
        if failure.retry_after is not None:
            wait = min(max(failure.retry_after, 0.0), self.max_retry_after)
        else:
            backoff = min(self.max_delay, self.first_delay * 2.0 ** min(tries - 1, 64))
            wait = backoff * (0.5 + jitter / 2)
        return wait if elapsed + wait <= self.max_elapsed else None

    def why_not(self, failure: ProviderError, tries: int) -> str:
        """Why a failure ends the call after ``tries`` requests (see :meth:`delay`)."""
        if not failure.retryable:
            return "not retried: the provider refused the request itself"
        requests = "1 request" if tries == 1 else f"{tries} requests"
        if tries > self.retries:
            return f"gave up after {requests} (the retry policy allows {self.retries} retries)"
        return (
            f"gave up after {requests}: the next would start past the retry policy's "
            f"{self.max_elapsed:g} s"
        )


@dataclass(frozen=True, slots=True)
class ModelCallPolicy:
    """How each model call is bounded and retried: the ``timeout`` of a try (``None``: none),
    the ``retry`` policy, and the ``clock`` its waits and timeout are measured on (``None``:
    the event loop's; see :class:`RetryClock`).

    Example::

        policy = ModelCallPolicy(timeout=60, clock=ManualClock())
        response = await policy.call(lambda touch: model.request(request))
    """

    timeout: float | None = DEFAULT_MODEL_TIMEOUT
    retry: ModelRetryPolicy = field(default_factory=ModelRetryPolicy)
    clock: RetryClock | None = None
    on_failure: Callable[[ProviderError, bool], Awaitable[None]] | None = None
    """Told of each failed try: the provider's failure, and whether the call tries again
    (the engine's observers hear it as ``ModelCallFailed``, for metrics)."""
    _timers: _ClockTimers | None = field(default=None, init=False, repr=False, compare=False)
    """The clock's time and timers, if it has timers (looked for once, not per call)."""

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"a model timeout must be more than 0 seconds, not {self.timeout}")
        clock: object = self.clock  # a RetryClock may have timers too
        if isinstance(clock, _Timers):
            object.__setattr__(self, "_timers", (clock.monotonic, clock.call_later))

    def observed(
        self, on_failure: Callable[[ProviderError, bool], Awaitable[None]]
    ) -> ModelCallPolicy:
        """This policy, telling ``on_failure`` of each failed try: a copy made without
        ``__post_init__`` (whose protocol check of the clock would run again per attempt).

        Example::

            policy = runtime.model_calls.observed(report)
        """
        observed = copy.copy(self)
        object.__setattr__(observed, "on_failure", on_failure)
        return observed

    async def call(self, attempt: Callable[[Touch], Awaitable[_T]]) -> _T:
        """``attempt(touch)`` until it answers, under the timeout and the retry policy; a
        streaming attempt calls ``touch`` for each chunk. Raises the failure that ends it
        (a provider's as :class:`~tether.errors.ProviderError`), anything else at once."""
        clock = self.clock
        now = clock.monotonic if clock is not None else asyncio.get_running_loop().time
        started = now()
        tries = 0
        while True:
            tries += 1
            try:
                return await self._bounded(attempt)
            except Exception as exc:
                failure = provider_failure(exc)
                if failure is None:
                    raise
                wait = self.retry.delay(failure, tries, now() - started, random.random())
                if self.on_failure is not None:
                    await self.on_failure(failure, wait is not None)
                if wait is None:
                    raise failure.ended(tries, self.retry.why_not(failure, tries)) from exc
                # Not the failure's text: it can quote what a redactor would mask.
                status = f", HTTP {failure.status}" if failure.status is not None else ""
                what = f"{failure.code}{status}"
                logger.info("model call failed (%s): try %d in %.2f s", what, tries + 1, wait)
            if clock is not None:
                await clock.sleep(wait)
            else:
                await asyncio.sleep(wait)

    async def _bounded(self, attempt: Callable[[Touch], Awaitable[_T]]) -> _T:
        timeout = self.timeout
        if timeout is None or math.isinf(timeout):
            return await attempt(_untouched)
        try:
            async with asyncio.timeout(None) as limit:
                watch = _Watch(timeout, limit, self._timers or _loop_timers())
                try:
                    return await attempt(watch.touch)
                finally:
                    watch.stop()
        except TimeoutError:
            if limit.expired():
                raise ProviderTimeout(f"the provider sent nothing for {timeout:g} s") from None
            raise


def _untouched() -> None:
    pass


class _Watch:
    """Expires ``limit`` once ``seconds`` pass without a touch: one timer per call, moved
    only when it fires (a chunk costs a clock read, not a new timer)."""

    __slots__ = ("_armed", "_handle", "_last", "_later", "_limit", "_now", "_seconds")

    def __init__(self, seconds: float, limit: asyncio.Timeout, timers: _ClockTimers) -> None:
        self._now, self._later = timers
        self._seconds = seconds
        self._limit = limit
        self._last = self._now()
        self._armed = self._last + seconds
        self._handle: _Cancellable = self._later(seconds, self._check)

    def touch(self) -> None:
        self._last = self._now()

    def _check(self) -> None:
        due = self._last + self._seconds
        if due <= self._armed:  # no chunk since the timer was set
            self._limit.reschedule(asyncio.get_running_loop().time())  # expires at once
        else:
            self._armed = due
            self._handle = self._later(due - self._now(), self._check)

    def stop(self) -> None:
        self._handle.cancel()


def _loop_timers() -> _ClockTimers:
    """The running event loop's time and timers, for a policy whose clock has none."""
    loop = asyncio.get_running_loop()
    return loop.time, loop.call_later


def provider_failure(error: BaseException) -> ProviderError | None:
    """The provider failure ``error`` stands for, or ``None`` if it is none (a bug, a refusal
    of Tether's, a context overflow): a :class:`~tether.errors.ProviderError` as it is, a
    :class:`~tether.errors.ModelTransientError` (retryable, no status), and what a provider's
    SDK raises (read by duck typing, down its ``__cause__`` chain): an HTTP status with its
    ``Retry-After``, a timeout, a connection error."""
    if isinstance(error, ProviderError):
        return error
    if isinstance(error, ModelTransientError):
        return ProviderError(str(error) or type(error).__name__, retryable=True)
    if isinstance(error, TetherError):
        return None
    cause: BaseException | None = error
    for _ in range(5):  # an SDK's error wraps its HTTP client's, rarely deeper
        if cause is None:
            return None
        status = _status_of(cause)
        if status is not None:
            return failure_of_status(status, _retry_after_of(cause), _detail_of(cause))
        names = {kind.__name__ for kind in type(cause).__mro__}
        if isinstance(cause, TimeoutError) or names & _TIMEOUTS:
            return ProviderTimeout(f"the request to the provider timed out ({_named(cause)})")
        if isinstance(cause, ConnectionError) or names & _CONNECTIONS:
            return ProviderError(f"the provider could not be reached ({_named(cause)})")
        cause = cause.__cause__
    return None


def failure_of_status(
    status: int, retry_after: float | None = None, detail: str | None = None
) -> ProviderError:
    """The failure an HTTP error status from a provider stands for."""
    said = f": {detail}" if detail else ""
    if status == 429:
        return ProviderRateLimited(
            f"the provider rate-limited the request (HTTP 429){said}",
            status=status,
            retry_after=retry_after,
        )
    if status == 408:
        return ProviderTimeout(f"the provider timed the request out (HTTP 408){said}", status=408)
    return ProviderError(
        f"the provider answered HTTP {status}{said}", status=status, retry_after=retry_after
    )


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The wait a provider's headers ask for: ``retry-after-ms``, or ``Retry-After`` in
    seconds or as an HTTP date (from ``now``); ``None`` if they ask none (or make no sense)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    milliseconds = _number(lowered.get("retry-after-ms"))
    if milliseconds is not None:
        return milliseconds / 1000
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) and number >= 0 else None


def _status_of(error: BaseException) -> int | None:
    for owner in (error, getattr(error, "response", None)):
        status = getattr(owner, "status_code", None)
        if isinstance(status, int) and 400 <= status <= 599:
            return status
    return None


def _retry_after_of(error: BaseException) -> float | None:
    given = getattr(error, "retry_after", None)
    if isinstance(given, int | float) and not isinstance(given, bool):
        return float(given)
    for owner in (error, getattr(error, "response", None)):
        headers = getattr(owner, "headers", None)
        if isinstance(headers, Mapping):
            found = retry_after_seconds({str(k): str(v) for k, v in headers.items()})
            if found is not None:
                return found
    return None


def _detail_of(error: BaseException) -> str | None:
    """The provider's own short message (OpenAI's and Anthropic's ``error.message``), never
    a whole body: a body can hold the prompt."""
    body: Any = getattr(error, "body", None)
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    message = body.get("message") if isinstance(body, Mapping) else None
    if not isinstance(message, str) or not message.strip():
        return None
    message = " ".join(message.split())
    return message if len(message) <= _DETAIL_CHARS else message[: _DETAIL_CHARS - 1] + "…"


def _named(error: BaseException) -> str:
    text = " ".join(str(error).split())[:_DETAIL_CHARS]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
