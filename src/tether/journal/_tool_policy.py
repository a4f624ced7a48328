"""How a tool call is bounded and retried: a timeout on each attempt, and attempts again
after a failure, each failed one journaled.

The journal runs the policy around the tool's executor (``Turn.tool(call, policy=...)``):
an attempt that raises or outlasts ``timeout`` is a failure. Unless it was the last one, the
failure is journaled (a ``step_recorded`` of the call named :data:`ATTEMPT_FAILED`: its
attempt, its error, when the next starts) before the wait, so a crash during the wait or the
next attempt resumes with the attempts left, after the wait left. The last failure is the
call's error outcome, what the model reads. Steps the tool took in an attempt
(``ctx.step``) are served to the next from the log: a retry redoes only what failed.

Retrying a tool runs it again, so a tool with a policy of retries should be safe to run
twice, as for a tool declared idempotent (which alone is re-driven after a crash cut an
attempt short; another's attempt cut short is an unknown outcome, as without a policy).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Protocol

from tether.models import RetryClock

__all__ = ("ATTEMPT_FAILED", "AttemptTimeout", "FailedAttempt", "ToolFailure", "ToolPolicy")

ATTEMPT_FAILED: Final = "tether.attempt_failed"
"""The step a call records for each attempt that failed and was tried again (its value:
``{"attempt": n, "error": text, "retryAt": iso time}``)."""


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """What failed an attempt: the text the model reads if no attempt is left, and the
    exception (``None``: the attempt timed out)."""

    message: str
    cause: BaseException | None


class ToolFailure(Exception):
    """A tool's attempt failed with ``message``, the text the model reads if no attempt is
    left: what an executor raises for a failure a :class:`ToolPolicy` may retry (the
    built-in agent's raises it for a tool that raised, keeping the tool's error as its
    ``__cause__``). Any other exception an executor raises is a failure too, read as
    ``Type: message``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How each call of a tool is bounded and retried: ``timeout`` seconds an attempt may
    take (``None``: no limit), ``retries`` more attempts at most after a failure, the first
    after ``backoff`` seconds, each next one twice as long up to ``max_backoff``, times a
    random factor between 0.5 and 1 (so that calls failing together do not come back
    together). ``retry_on`` names the exceptions a retry is for (a timeout always is); a
    tool's error of another class ends the call at once.

    The same policy serves the built-in agent's tools (``@tool(policy=...)``,
    ``Agent(tool_policies=...)``) and the frameworks' (the adapters' ``tool_policies``).

    Example::

        @tool(idempotent=True, policy=ToolPolicy(timeout=10, retries=3, backoff=0.5))
        async def weather(city: str) -> str:
            return await fetch_weather(city)
    """

    timeout: float | None = None
    retries: int = 0
    backoff: float = 1.0
    max_backoff: float = 60.0
    retry_on: tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout > 0:  # NaN too
            raise ValueError(f"a tool timeout must be more than 0 seconds, not {self.timeout}")
        if self.retries < 0:
            raise ValueError(f"retries must be 0 or more, not {self.retries}")
        for name in ("backoff", "max_backoff"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be 0 or more seconds, not {value}")

    def delay(self, attempt: int, failure: BaseException | None, jitter: float) -> float | None:
        """The wait before another attempt, after the ``attempt``-th failed with ``failure``
        (``None``: it timed out), or ``None`` if no other is made. ``jitter`` is in [0, 1)."""
        if attempt > self.retries:
            return None
        if failure is not None:
            cause = failure.__cause__ if isinstance(failure, ToolFailure) else failure
            if not isinstance(cause if cause is not None else failure, self.retry_on):
                return None
        wait = min(self.max_backoff, self.backoff * 2.0 ** min(attempt - 1, 64))
        return wait * (0.5 + jitter / 2)


class AttemptTimeout:
    """An attempt's time limit on ``clock`` (the event loop's when ``None``; a clock with
    ``call_later`` measures it, as the engine's manual clock does): ``async with`` it around
    the attempt, which is cancelled at the limit and raises ``TimeoutError``."""

    __slots__ = ("_clock", "_handle", "_limit", "_seconds", "expired")

    def __init__(self, seconds: float, clock: RetryClock | None) -> None:
        self._seconds = seconds
        self._clock = clock
        self._limit = asyncio.timeout(None)
        self._handle: asyncio.TimerHandle | _Cancellable | None = None
        self.expired = False

    async def __aenter__(self) -> AttemptTimeout:
        await self._limit.__aenter__()
        call_later = getattr(self._clock, "call_later", None)
        if call_later is None:
            self._handle = asyncio.get_running_loop().call_later(self._seconds, self._expire)
        else:
            self._handle = call_later(self._seconds, self._expire)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
        await self._limit.__aexit__(kind, error, traceback)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _expire(self) -> None:
        self._handle = None
        self.expired = True
        self._limit.reschedule(asyncio.get_running_loop().time())  # expires at once


class _Cancellable(Protocol):
    def cancel(self) -> object: ...
