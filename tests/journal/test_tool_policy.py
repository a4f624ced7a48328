"""A tool policy: each attempt bounded, a failed one journaled and tried again, a crash
between attempts resumed with the attempts left, and a replay that runs nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

import pytest
from pydantic import JsonValue

from tether.engine import ManualClock
from tether.journal import (
    UNKNOWN_OUTCOME,
    Journal,
    JournalHooks,
    ToolExecutor,
    ToolFailure,
    ToolPolicy,
    ToolScope,
    Turn,
)
from tether.journal._tool_policy import ATTEMPT_FAILED
from tether.messages import ToolCall, ToolResult
from tether.records import Record, StepRecorded
from tether.store import MemoryStore, Store
from tether.testing import copy_prefix

from .harnesses import new_conversation, user
from .test_resume import cut_after

_T = TypeVar("_T")


class Flaky:
    """Fails its first ``failures`` attempts; each attempt takes the step ``fetch`` (run
    once whatever the attempts) and then counts itself."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or ConnectionError("reset by peer")
        self.attempts = 0
        self.fetches = 0

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        async def fetch() -> JsonValue:
            self.fetches += 1
            return f"page {self.fetches}"

        page = await scope.step("fetch", fetch)
        self.attempts += 1
        if self.attempts <= self.failures:
            raise self.error
        return ToolResult(call_id=call.call_id, content=f"{page} on attempt {self.attempts}")


class Hangs:
    def __init__(self) -> None:
        self.attempts = 0

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        self.attempts += 1
        await asyncio.Event().wait()
        raise AssertionError("never")


class OneCall:
    name, version = "one-call", "1"

    def __init__(self, policy: ToolPolicy | None, *, idempotent: bool = True) -> None:
        self.policy = policy
        self.idempotent = idempotent

    async def run(self, turn: Turn) -> JsonValue:
        call = ToolCall(
            call_id="c1",
            name="fetch_page",
            args={},
            idempotency_key=f"{turn.execution_id}:c1",
            idempotent=self.idempotent,
        )
        result = await turn.tool(call, policy=self.policy)
        return {"content": result.content, "status": result.status.value}


class Clock(ManualClock):
    """A manual clock that says when something waits on it."""

    def __init__(self, start: datetime | None = None) -> None:
        super().__init__(start)
        self.asleep = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.asleep.set()
        await super().sleep(seconds)

    def call_later(self, seconds: float, callback: Callable[[], None]) -> asyncio.Future[None]:
        self.asleep.set()
        return super().call_later(seconds, callback)

    async def waiting(self) -> None:
        await self.asleep.wait()
        self.asleep.clear()


async def _journal(
    store: Store, cid: str, tools: ToolExecutor | None = None, clock: Clock | None = None
) -> Journal:
    return await Journal.open(store, cid, tools=tools, hooks=JournalHooks(clock=clock or Clock()))


async def _run_advancing(clock: Clock, run: Awaitable[_T], step: float = 3600) -> _T:
    """Move the clock on by ``step`` whenever the run waits on it, until the run ends."""
    running = asyncio.ensure_future(run)
    while not running.done():
        if clock.pending:
            await clock.advance(step)
            continue
        waiting = asyncio.ensure_future(clock.waiting())
        await asyncio.wait({running, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
    return running.result()


def _failures(records: Sequence[Record]) -> list[dict[str, JsonValue]]:
    return [
        r.payload.value
        for r in records
        if isinstance(r.payload, StepRecorded)
        and r.payload.name == ATTEMPT_FAILED
        and isinstance(r.payload.value, dict)
    ]


async def test_a_failed_attempt_is_journaled_and_tried_again(store: Store) -> None:
    cid = await new_conversation(store)
    clock, tools = Clock(), Flaky(failures=2)
    policy = ToolPolicy(retries=2, backoff=1)
    run = (await _journal(store, cid, tools, clock)).exec(OneCall(policy), [user("go")])
    result = await _run_advancing(clock, run, step=1)
    assert result.output == {"content": "page 1 on attempt 3", "status": "ok"}
    # The step ran once: the attempts after the first were served its value.
    assert (tools.attempts, tools.fetches) == (3, 1)
    failures = _failures(await store.read(cid))
    assert [f["attempt"] for f in failures] == [1, 2]
    assert failures[0]["error"] == "ConnectionError: reset by peer"
    # The waits doubled (times a jitter between 0.5 and 1): 1 s, then 2 s, at most.
    assert 1 <= clock.monotonic() <= 3

    replayed = await (await Journal.open(store, cid)).replay(OneCall(policy))
    assert replayed == [{"content": "page 1 on attempt 3", "status": "ok"}]


async def test_the_last_failure_is_the_error_the_model_reads(store: Store) -> None:
    cid = await new_conversation(store)
    clock, tools = Clock(), Flaky(failures=5)
    run = (await _journal(store, cid, tools, clock)).exec(
        OneCall(ToolPolicy(retries=1, backoff=0)), [user("go")]
    )
    result = await _run_advancing(clock, run)
    assert result.output == {"content": "ConnectionError: reset by peer", "status": "error"}
    assert tools.attempts == 2
    assert len(_failures(await store.read(cid))) == 1  # the last one is the outcome


async def test_an_error_the_policy_does_not_retry_ends_the_call_at_once(store: Store) -> None:
    cid = await new_conversation(store)
    tools = Flaky(failures=1, error=ValueError("bad city"))
    policy = ToolPolicy(retries=3, retry_on=(ConnectionError,))
    result = await (await _journal(store, cid, tools)).exec(OneCall(policy), [user("go")])
    assert result.output == {"content": "ValueError: bad city", "status": "error"}
    assert tools.attempts == 1 and not _failures(await store.read(cid))


async def test_a_tool_failure_reads_as_its_message_and_retries_on_its_cause(
    store: Store,
) -> None:
    class Wrapped:
        attempts = 0

        async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
            self.attempts += 1
            try:
                raise ConnectionError("down")
            except ConnectionError as exc:
                raise ToolFailure("fetch_page failed: ConnectionError: down") from exc

    cid = await new_conversation(store)
    tools = Wrapped()
    policy = ToolPolicy(retries=1, backoff=0, retry_on=(ConnectionError,))
    result = await (await _journal(store, cid, tools)).exec(OneCall(policy), [user("go")])
    assert tools.attempts == 2
    assert result.output == {
        "content": "fetch_page failed: ConnectionError: down",
        "status": "error",
    }


async def test_an_attempt_past_its_timeout_is_cancelled_and_retried(store: Store) -> None:
    cid = await new_conversation(store)
    clock, tools = Clock(), Hangs()
    run = (await _journal(store, cid, tools, clock)).exec(
        OneCall(ToolPolicy(timeout=5, retries=1, backoff=0)), [user("go")]
    )
    result = await _run_advancing(clock, run, step=5)
    assert result.output == {"content": "fetch_page timed out after 5 s", "status": "error"}
    assert tools.attempts == 2
    assert [f["error"] for f in _failures(await store.read(cid))] == [
        "fetch_page timed out after 5 s"
    ]


async def test_a_crash_between_attempts_resumes_with_the_attempts_left(store: Store) -> None:
    cid = await new_conversation(store)
    clock, policy = Clock(), ToolPolicy(retries=3, backoff=60)
    run = (await _journal(store, cid, Flaky(failures=1), clock)).exec(OneCall(policy), [user("go")])
    await _run_advancing(clock, run)
    # The log as a crash during the wait before the second attempt left it.
    cut = await cut_after(store, cid, StepRecorded.KIND, occurrence=2)  # fetch, then failed
    (failed,) = _failures(await cut.read(cid))
    retry_at = datetime.fromisoformat(str(failed["retryAt"]))

    tools, later = Flaky(failures=3), Clock(start=retry_at - timedelta(seconds=10))
    resuming = asyncio.ensure_future(
        (await _journal(cut, cid, tools, later)).resume(OneCall(policy))
    )
    # It waits out what was left of the wait the crash cut, no more.
    await later.waiting()
    await later.advance(9.9)
    assert tools.attempts == 0
    result = await _run_advancing(later, resuming, step=0.1)
    # Attempts 2, 3 and 4 (of 1 + 3 retries) ran here: the last is the outcome.
    assert tools.attempts == 3 and tools.fetches == 0  # the first attempt's step is served
    assert result.output == {"content": "ConnectionError: reset by peer", "status": "error"}
    assert [f["attempt"] for f in _failures(await cut.read(cid))] == [1, 2, 3]


async def test_a_crash_in_a_retried_call_that_is_not_idempotent_is_unknown(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    clock, policy = Clock(), ToolPolicy(retries=2, backoff=0)
    run = (await _journal(store, cid, Flaky(failures=1), clock)).exec(
        OneCall(policy, idempotent=False), [user("go")]
    )
    await _run_advancing(clock, run)
    cut = await cut_after(store, cid, StepRecorded.KIND, occurrence=2)
    tools = Flaky(failures=0)
    result = await (await _journal(cut, cid, tools)).resume(OneCall(policy, idempotent=False))
    assert tools.attempts == 0
    assert result.output == {"content": UNKNOWN_OUTCOME, "status": "unknown"}


def test_a_policy_refuses_what_makes_no_sense() -> None:
    with pytest.raises(ValueError, match="timeout"):
        ToolPolicy(timeout=0)
    with pytest.raises(ValueError, match="retries"):
        ToolPolicy(retries=-1)
    with pytest.raises(ValueError, match="backoff"):
        ToolPolicy(backoff=float("nan"))


async def test_a_crash_at_every_record_of_a_retried_call_resumes_to_the_same_end(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    clock, policy = Clock(), ToolPolicy(retries=3, backoff=1)
    run = (await _journal(store, cid, Flaky(failures=2), clock)).exec(OneCall(policy), [user("go")])
    expected = (await _run_advancing(clock, run)).output
    records = await store.read(cid)
    intent = next(r.seq for r in records if r.kind == "tool_called")
    for cut_at in range(intent, records[-1].seq):
        cut = MemoryStore()
        await copy_prefix(store, cid, cut_at, cut)
        held = await cut.read(cid)
        failed_before = len(_failures(held))
        fetched = any(
            isinstance(r.payload, StepRecorded) and r.payload.name == "fetch" for r in held
        )
        # The tool goes on from the attempts the log holds: it fails the first two in all.
        tools = Flaky(failures=2)
        tools.attempts = failed_before
        later = Clock(start=clock.now())
        resumed = await _run_advancing(
            later, (await _journal(cut, cid, tools, later)).resume(OneCall(policy))
        )
        assert resumed.output == expected, cut_at
        answered = any(r.kind == "tool_outcome" for r in held)
        assert tools.fetches == (0 if fetched or answered else 1), cut_at  # served, not run
        assert tools.attempts == (failed_before if answered else 3), cut_at  # none lost
        replayed = await (await Journal.open(cut, cid)).replay(OneCall(policy))
        assert replayed == [expected], cut_at
