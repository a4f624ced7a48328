"""A Hypothesis state machine that drives a backend and the reference store side by side.

Every rule runs one operation on both stores with the same arguments (ids and times
are deterministic) and requires the same outcome: an equal result, or the same error
class. Records compare by their bytes and hashes, so any divergence in sealing,
ordering or chaining fails the run; gates compare whole, so does any divergence in what
the index derives from the records (forks included) or in how it lists and pages them.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar, cast

from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tether.errors import TetherError
from tether.records import Record, RecordDraft, StepRecorded, UserMessage, format_time
from tether.store import (
    CAPABILITIES,
    ClaimSettlement,
    Conversation,
    MemoryStore,
    NewSubmission,
    SessionKey,
    Store,
    SubmissionStatus,
)
from tether.testing.storetest._base import T0, BaseConformance, CompleteStore, Needed, offers
from tether.testing.storetest._machine_gates import GateRules
from tether.testing.storetest._machine_limits import LimitRules
from tether.testing.storetest._machine_memory import MemoryRules
from tether.testing.storetest._machine_sessions import SessionRules
from tether.testing.storetest._machine_versions import VersionRules
from tether.testing.storetest._machine_webhooks import WebhookRules

__all__ = ("MachineCase", "run_reference_machine")

SESSIONS = tuple(
    SessionKey("support", instance, session)
    for instance in ("acme", "globex")
    for session in ("a", "b")
)
INPUTS = (
    {"kind": "user", "body": "hi"},
    {"kind": "user", "body": "bye"},
    {"kind": "signal", "body": "x", "n": 1.5},
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _normalize(value: Any) -> Any:
    if isinstance(value, list):
        return [_normalize(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_normalize(item) for item in value)
    if isinstance(value, Record):
        return (value.seq, value.kind, value.canonical, value.prev_hash, value.hash)
    return value


class _ReferenceMachine(
    GateRules,
    SessionRules,
    VersionRules,
    LimitRules,
    MemoryRules,
    WebhookRules,
    RuleBasedStateMachine,
):
    factory: ClassVar[tuple[Callable[[Path], Awaitable[Store]]]]  # a tuple keeps it unbound
    directory: ClassVar[Path]
    steps: ClassVar[list[int]]
    _examples = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.reference = MemoryStore()
        path = self.directory / f"example-{next(self._examples)}"
        path.mkdir(parents=True)
        self.subject = self.loop.run_until_complete(self.factory[0](path))
        everything: tuple[Needed, ...] = (*CAPABILITIES, "waits")
        self.offered = {n for n in everything if offers(self.subject, n)}
        self.ids = itertools.count(1)
        self.clock = 0
        self.submissions: list[str] = []
        self.attempts: list[str] = []
        self.conversations: list[str] = []
        self.fences: dict[str, int] = {}  # the latest fence minted per conversation
        self.exports: list[tuple[Conversation, list[Record]]] = []  # logs as they were read

    def teardown(self) -> None:
        self.loop.run_until_complete(self.subject.close())
        self.loop.close()

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{next(self.ids):06d}"

    def offers(self, needed: Needed) -> bool:
        return needed in self.offered

    def _both(
        self,
        operation: Callable[[CompleteStore], Awaitable[Any]],
        *,
        count: bool = True,
        needs: Needed | None = None,
    ) -> Any:
        """Run ``operation`` on both stores; an operation the backend does not offer runs
        on neither (``("skipped", None)``), so the two stay in step."""
        if needs is not None and not self.offers(needs):
            return ("skipped", None)
        if count:
            self.steps.append(1)
        outcomes = []
        for store in (self.reference, self.subject):
            try:
                done = self.loop.run_until_complete(operation(cast(CompleteStore, store)))
                outcomes.append(("ok", _normalize(done)))
            except TetherError as exc:
                outcomes.append(("error", type(exc).__name__))
        assert outcomes[0] == outcomes[1], f"reference {outcomes[0]!r} != backend {outcomes[1]!r}"
        return outcomes[0]

    def _now(self) -> Any:
        return T0 + timedelta(seconds=self.clock)

    def _ids(self, status: SubmissionStatus) -> list[str]:
        if status is SubmissionStatus.QUEUED:  # claimable means queued *and* its session's head
            found = self.loop.run_until_complete(self.reference.list_runnable(1000))
        else:
            found = self.loop.run_until_complete(self.reference.list_submissions(status))
        return [submission.id for submission in found]

    def _has(self, status: SubmissionStatus) -> bool:
        return bool(self._ids(status))

    def _attempt_for(self, data: st.DataObject, sid: str) -> str:
        """Usually the attempt that owns ``sid``; sometimes a stale one."""
        owner = self.loop.run_until_complete(self.reference.get_submission(sid)).attempt_id
        stale = self.attempts or ["att-none"]
        return data.draw(st.sampled_from(stale if owner is None else [owner] * 4 + stale))

    # --- rules ------------------------------------------------------------------------

    @rule(
        key=st.sampled_from(SESSIONS),
        payload=st.sampled_from(INPUTS),
        dispatch=st.sampled_from((None, None, "d1", "d2")),
        priority=st.sampled_from((0, 0, 1, -1, 3)),  # claim order: by rank, then admission
    )
    def admit(
        self, key: SessionKey, payload: dict[str, Any], dispatch: str | None, priority: int
    ) -> None:
        new = NewSubmission(
            self._id("sub"),
            key,
            self._id("conv"),
            payload,
            self._now(),
            dispatch,
            priority=priority,
        )
        kind, result = self._both(lambda store: store.admit(new))
        if kind == "ok":
            self.submissions.append(result.submission.id)
            self.conversations.append(result.submission.conversation_id)

    @rule(
        key=st.sampled_from(SESSIONS),
        payload=st.sampled_from(INPUTS),
        dispatch=st.sampled_from((None, None, "d1", "d2")),
        delay=st.integers(0, 60),
    )
    def admit_scheduled(
        self, key: SessionKey, payload: dict[str, Any], dispatch: str | None, delay: int
    ) -> None:
        """A delayed dispatch (capability ``timers``): ``scheduled`` until ``release_due``."""
        new = NewSubmission(
            self._id("sub"),
            key,
            self._id("conv"),
            payload,
            self._now(),
            dispatch,
            run_at=self._now() + timedelta(seconds=delay),
        )
        kind, result = self._both(lambda store: store.admit(new), needs="timers")
        if kind == "ok":
            self.submissions.append(result.submission.id)
            self.conversations.append(result.submission.conversation_id)

    @rule()
    def timers(self) -> None:
        """Release what is due now, and ask when the next thing is (capability ``timers``)."""
        now = self._now()
        self._both(lambda store: store.release_due(now), needs="timers")
        self._both(lambda store: store.next_due(), needs="timers")

    @rule(
        key=st.sampled_from(SESSIONS),
        payload=st.sampled_from(INPUTS),
        dispatch=st.sampled_from((None, None, "d1", "d2")),
        lease=st.integers(1, 60),
    )
    def admit_and_claim(
        self, key: SessionKey, payload: dict[str, Any], dispatch: str | None, lease: int
    ) -> None:
        new = NewSubmission(self._id("sub"), key, self._id("conv"), payload, self._now(), dispatch)
        attempt, now = self._id("att"), self._now()
        self.attempts.append(attempt)
        kind, result = self._both(
            lambda store: store.admit_and_claim(
                new,
                attempt_id=attempt,
                owner_id="o",
                lease_expires_at=now + timedelta(seconds=lease),
                now=now,
            ),
            needs="admit_and_claim",
        )
        if kind == "ok":
            self.submissions.append(result.submission.id)
            self.conversations.append(result.submission.conversation_id)
            if result.submission.attempt_id == attempt:
                self.fences[result.submission.conversation_id] = result.submission.fence

    @precondition(lambda self: self._has(SubmissionStatus.QUEUED))
    @rule(data=st.data(), lease=st.integers(1, 60))
    def claim(self, data: st.DataObject, lease: int) -> None:
        sid = data.draw(st.sampled_from(self._ids(SubmissionStatus.QUEUED)))
        attempt, now = self._id("att"), self._now()
        self.attempts.append(attempt)
        kind, result = self._both(
            lambda s: s.claim(
                sid,
                attempt_id=attempt,
                owner_id="o",
                lease_expires_at=now + timedelta(seconds=lease),
                now=now,
            )
        )
        if kind == "ok":
            self.fences[result.conversation_id] = result.fence

    @precondition(lambda self: self._has(SubmissionStatus.RUNNING))
    @rule(
        data=st.data(),
        action=st.sampled_from(("release", "refund", "renew", "park", "reserve", "reserve")),
        error=st.sampled_from((None, "boom", "bang")),
        seconds=st.integers(0, 90),
        result=JSON_VALUES,
    )
    def running_transition(
        self, data: st.DataObject, action: str, error: str | None, seconds: int, result: Any
    ) -> None:
        sid = data.draw(st.sampled_from(self._ids(SubmissionStatus.RUNNING)))
        attempt = self._attempt_for(data, sid)
        lease = self._now() + timedelta(seconds=seconds)
        settlement = {"status": "succeeded", "result": result}
        cid = self.loop.run_until_complete(self.reference.get_submission(sid)).conversation_id
        head = self.loop.run_until_complete(self.reference.head(cid))
        seen = data.draw(st.sampled_from((None, head, head, head - 1)))  # a park's CAS
        operations: dict[str, Callable[[CompleteStore], Awaitable[Any]]] = {
            "release": lambda s: s.release(sid, attempt_id=attempt, last_error=error),
            "refund": lambda s: s.release(sid, attempt_id=attempt, refund_attempt=True),
            "renew": lambda s: s.renew_lease(sid, attempt_id=attempt, lease_expires_at=lease),
            "park": lambda s: s.park(sid, attempt_id=attempt, reason="approval", expected_seq=seen),
            "reserve": lambda s: s.reserve_settlement(
                sid, attempt_id=attempt, settlement=settlement
            ),
        }
        self._both(operations[action], needs="waits" if action == "park" else None)

    @precondition(lambda self: self.conversations)
    @rule(data=st.data(), head_offset=st.sampled_from((0, 0, 0, -1, 1)))
    def append_decision(self, data: st.DataObject, head_offset: int) -> None:
        """A decision, usually on a waiting submission's conversation, waking it."""
        waiting = self._ids(SubmissionStatus.WAITING)
        sid = data.draw(st.sampled_from([*waiting, *waiting, *self.submissions, None]))
        cid = (
            self.loop.run_until_complete(self.reference.get_submission(sid)).conversation_id
            if sid is not None
            else data.draw(st.sampled_from(self.conversations))
        )
        head = self.loop.run_until_complete(self.reference.head(cid))
        time = format_time(self._now())
        drafts = [RecordDraft(UserMessage(body="decided"), id=self._id("rec"), time=time)]
        self._both(
            lambda s: s.append_decision(cid, drafts, expected_seq=head + head_offset, wake=sid),
            needs="gates",
        )

    @precondition(lambda self: self._has(SubmissionStatus.RUNNING))
    @rule(
        data=st.data(),
        head_offset=st.sampled_from((0, 0, 0, -1, 1)),
        fence_offset=st.sampled_from((0, 0, -1, 1)),
        result=JSON_VALUES,
    )
    def append_settled(
        self, data: st.DataObject, head_offset: int, fence_offset: int, result: Any
    ) -> None:
        sid = data.draw(st.sampled_from(self._ids(SubmissionStatus.RUNNING)))
        attempt = self._attempt_for(data, sid)
        cid = self.loop.run_until_complete(self.reference.get_submission(sid)).conversation_id
        head = self.loop.run_until_complete(self.reference.head(cid))
        fence = max(self.fences.get(cid, 0) + fence_offset, 0)
        settle = ClaimSettlement(
            sid, attempt, {"status": "succeeded", "result": result}, self._now()
        )
        time = format_time(self._now())
        drafts = [RecordDraft(UserMessage(body="end"), id=self._id("rec"), time=time)]
        self._both(
            lambda s: s.append_settled(
                cid, drafts, expected_seq=head + head_offset, fence=fence, settle=settle
            )
        )

    @precondition(lambda self: self._has(SubmissionStatus.WAITING))
    @rule(data=st.data())
    def unpark(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(self._ids(SubmissionStatus.WAITING)))
        self._both(lambda s: s.unpark(sid), needs="waits")

    @precondition(lambda self: self._has(SubmissionStatus.TERMINALIZING))
    @rule(data=st.data())
    def finalize(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(self._ids(SubmissionStatus.TERMINALIZING)))
        now = self._now()
        self._both(lambda s: s.finalize_settlement(sid, now=now))

    @precondition(lambda self: self.submissions)
    @rule(
        data=st.data(),
        action=st.sampled_from(
            (
                "cancel",
                "get",
                "attempts",
                "claim",
                "release",
                "park",
                "unpark",
                "reserve",
                "finalize",
            )
        ),
    )
    def any_submission(self, data: st.DataObject, action: str) -> None:
        """Any operation on any submission (or an unknown one): mostly the error paths."""
        sid = data.draw(st.sampled_from([*self.submissions, "sub-absent"]))
        attempt = self._attempt_for(data, sid) if sid != "sub-absent" else "att-none"
        now = self._now()
        later = now + timedelta(seconds=30)
        operations: dict[str, Callable[[CompleteStore], Awaitable[Any]]] = {
            "cancel": lambda s: s.request_cancel(sid, now=now),
            "get": lambda s: s.get_submission(sid),
            "attempts": lambda s: s.list_attempts(sid),
            "claim": lambda s: s.claim(
                sid, attempt_id=attempt, owner_id="o", lease_expires_at=later, now=now
            ),
            "release": lambda s: s.release(sid, attempt_id=attempt),
            "park": lambda s: s.park(sid, attempt_id=attempt, reason="children"),
            "unpark": lambda s: s.unpark(sid),
            "reserve": lambda s: s.reserve_settlement(
                sid, attempt_id=attempt, settlement={"status": "failed"}
            ),
            "finalize": lambda s: s.finalize_settlement(sid, now=now),
            "absorb": lambda s: s.settle_absorbed(sid, settlement={"status": "succeeded"}, now=now),
        }
        parks = action in ("park", "unpark")
        kind, result = self._both(operations[action], needs="waits" if parks else None)
        if action == "claim" and kind == "ok":
            self.fences[result.conversation_id] = result.fence

    @rule(
        status=st.sampled_from((None, *SubmissionStatus)),
        limit=st.integers(1, 5),
        seconds=st.integers(0, 40),
    )
    def listings_and_time(self, status: SubmissionStatus | None, limit: int, seconds: int) -> None:
        self.clock += seconds
        now = self._now()
        listings: tuple[Callable[[CompleteStore], Awaitable[Any]], ...] = (
            lambda s: s.list_submissions(status),
            lambda s: s.list_runnable(limit),
            lambda s: s.list_expired_leases(now),
        )
        self._both(listings[limit % 3])

    @precondition(lambda self: self.conversations)
    @rule(
        data=st.data(),
        size=st.integers(1, 3),
        head_offset=st.sampled_from((0, 0, 0, -1, 1)),
        fence_offset=st.sampled_from((0, 0, -1, 1)),
        value=JSON_VALUES,
    )
    def append(
        self, data: st.DataObject, size: int, head_offset: int, fence_offset: int, value: Any
    ) -> None:
        cid = data.draw(st.sampled_from(self.conversations))
        head = self.loop.run_until_complete(self.reference.head(cid))
        fence = max(self.fences.get(cid, 0) + fence_offset, 0)
        time = format_time(self._now())
        drafts = [
            RecordDraft(
                StepRecorded(call_id="c", name="s", value=value),
                id=self._id("rec"),
                time=time,
                turn=n,
            )
            if n % 2
            else RecordDraft(
                UserMessage(body=f"m{n}"), id=self._id("rec"), time=time, submission_id="x"
            )
            for n in range(size)
        ]
        self._both(lambda s: s.append(cid, drafts, expected_seq=head + head_offset, fence=fence))

    @precondition(lambda self: self.conversations)
    @rule(data=st.data(), after=st.integers(0, 12), limit=st.integers(1, 6))
    def read(self, data: st.DataObject, after: int, limit: int) -> None:
        cid = data.draw(st.sampled_from([*self.conversations, "conv-absent"]))
        self._both(lambda s: s.read(cid, after_seq=after, limit=limit))
        self._both(lambda s: s.head(cid))

    @precondition(lambda self: self.conversations)
    @rule(data=st.data())
    def mint_fence(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from(self.conversations))
        kind, fence = self._both(lambda s: s.mint_fence(cid))
        if kind == "ok":
            self.fences[cid] = fence

    @precondition(lambda self: self.conversations)
    @rule(data=st.data(), key=st.sampled_from((*SESSIONS, SessionKey("support", "acme", "fork"))))
    def fork(self, data: st.DataObject, key: SessionKey) -> None:
        cid = data.draw(st.sampled_from(self.conversations))
        head = self.loop.run_until_complete(self.reference.head(cid))
        at = data.draw(st.integers(0, head + 1))
        new_id, now = self._id("conv"), self._now()
        kind, result = self._both(
            lambda s: s.fork(cid, at_seq=at, key=key, new_conversation_id=new_id, created_at=now),
            needs="forks",
        )
        if kind == "ok":
            self.conversations.append(result.id)

    @invariant()
    def chains_verify(self) -> None:
        for cid in set(self.conversations):
            self._both(functools.partial(_verify, conversation_id=cid), count=False)


async def _verify(store: CompleteStore, *, conversation_id: str) -> int:
    return await store.verify(conversation_id)


#: Examples run between two looks at the clock; a time budget always allows the first batch.
BATCH = 10


def run_reference_machine(
    make_subject: Callable[[Path], Awaitable[Store]],
    directory: Path,
    *,
    examples: int,
    steps_per_example: int,
    seconds: float | None = None,
    derandomize: bool = False,
) -> int:
    """Run the machine for up to ``examples`` examples of up to ``steps_per_example`` steps;
    return the number of operations compared.

    With ``seconds``, examples run in batches of ``BATCH`` (each with a fresh seed) until
    ``seconds`` have passed: a slow backend, or a busy machine, compares fewer operations
    instead of running into a test timeout. Each example has no deadline of its own. With
    ``derandomize``, the n-th batch runs seed n: every run draws the same examples (a failure
    in CI fails again where it is rerun), where otherwise each run draws new ones.

    Example::

        compared = run_reference_machine(
            make_store, tmp_path, examples=100, steps_per_example=50, seconds=30
        )
    """
    counted: list[int] = []
    machine = type(
        "ReferenceMachine",
        (_ReferenceMachine,),
        {"factory": (make_subject,), "directory": directory, "steps": counted},
    )
    ends_at = None if seconds is None else time.monotonic() + seconds
    remaining, seeds = examples, itertools.count()
    while remaining > 0:
        batch = remaining if ends_at is None else min(BATCH, remaining)
        if derandomize:
            seed(next(seeds))(machine)
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=batch,
                stateful_step_count=steps_per_example,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                database=None,
            ),
        )
        remaining -= batch
        if ends_at is not None and time.monotonic() >= ends_at:
            break
    return len(counted)


class MachineCase(BaseConformance):
    #: The state machine runs up to ``machine_examples`` examples of up to ``machine_steps``
    #: steps, for at most about ``machine_seconds`` (a time budget, so that a loaded machine
    #: runs fewer examples rather than timing out), the same examples on every run: a bounded
    #: tier for every test run. ``TETHER_SOAK=1`` runs the soak tier instead: up to
    #: ``machine_soak_examples`` examples, new ones each run, for at most about
    #: ``machine_soak_seconds`` (then raise or disable the test timeout, e.g. ``--timeout 0``).
    machine_examples: ClassVar[int] = 30
    machine_steps: ClassVar[int] = 50
    machine_seconds: ClassVar[float] = 10.0
    machine_soak_examples: ClassVar[int] = 1000
    machine_soak_seconds: ClassVar[float] = 300.0
    #: The minimum number of compared operations per run (the first batch of examples,
    #: which always runs, compares about 500).
    machine_min_operations: ClassVar[int] = 250

    def test_state_machine_matches_the_reference(self, tmp_path: Path) -> None:
        soak = bool(os.environ.get("TETHER_SOAK"))
        operations = run_reference_machine(
            self.make_store,
            tmp_path,
            examples=self.machine_soak_examples if soak else self.machine_examples,
            steps_per_example=self.machine_steps,
            seconds=self.machine_soak_seconds if soak else self.machine_seconds,
            derandomize=not soak,
        )
        assert operations >= self.machine_min_operations, (
            f"only {operations} operations were compared"
        )
