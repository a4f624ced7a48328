"""The claim loop: reconcile at start, then reclaim expired leases and claim session heads.

Woken by admissions (and decisions) and by a tick; runs at most ``max_concurrent_runs``
attempts at once, never two of one session in this process, in admission order per session.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterator
from datetime import timedelta

from tether._ids import UlidsOnDemand
from tether._tasks import cancel_and_wait
from tether.engine._attempt import run_attempt
from tether.engine._context import EngineContext
from tether.engine._delegation import cancel_children
from tether.engine._lease import Lease
from tether.engine._observe import (
    Correlation,
    RecoveryDecided,
    SubmissionClaimed,
    SubmissionSettledEvent,
)
from tether.engine._settle import SETTLEMENT_INDETERMINATE, failed, finish_reserved
from tether.engine._steering import SteerWatch
from tether.engine._versions import VERSION_DIVERGED
from tether.errors import ClaimLost, Fenced, TetherError
from tether.records import SubmissionSettled
from tether.store import (
    WAIT_FOR_CHILDREN,
    WAIT_FOR_TIMER,
    OwnerLiveness,
    Submission,
    SubmissionStatus,
)

__all__ = ("Coordinator", "requeue_if_stranded")

logger = logging.getLogger("tether.engine")


async def requeue_if_stranded(context: EngineContext, submission: Submission) -> bool:
    """Requeue a waiting submission whose wait is over: a cancel was requested, the gate it
    waits on is decided (or no longer open), its children have all settled, its wait for
    them lapsed, or its timer is due. Today each of those but the lapses commits with its
    wake-up; a store written by an earlier version (which decided, then requeued, in two
    commits) may hold strays, and a lapsed wait or a due timer has no commit of its own.
    Returns whether it requeued the submission."""
    if submission.status is not SubmissionStatus.WAITING:
        return False
    detail = "waiting"
    if submission.cancel_requested_at is None and submission.wait_reason == WAIT_FOR_CHILDREN:
        lapsed = submission.wait_until is not None and submission.wait_until <= context.clock.now()
        parents = context.capabilities.children
        if not lapsed and parents is not None:  # no ChildStore: no child was ever admitted
            children = await parents.list_children(submission.id)
            if any(child.status is not SubmissionStatus.SETTLED for child in children):
                return False  # still waiting for a child
        detail = "its wait for its children lapsed" if lapsed else "its children have settled"
    elif submission.cancel_requested_at is None and submission.wait_reason == WAIT_FOR_TIMER:
        due = submission.wait_until
        if due is not None and due > context.clock.now():
            return False  # still asleep
        detail = "its timer is due"
    elif submission.cancel_requested_at is None:
        view = await context.views.refreshed(context.store, submission.conversation_id)
        gate = view.open_gate(submission.id)
        if gate is not None and gate.request is not None and gate.decision is None:
            return False  # still waiting for a decision
    waits = context.capabilities.waits
    if waits is None:  # no store that cannot park holds a waiting submission
        return False
    try:
        await waits.unpark(submission.id)
    except ClaimLost:
        return False  # woken meanwhile
    await context.instrumentation.emit(
        RecoveryDecided(Correlation.of(submission), decision="requeue_stranded", detail=detail)
    )
    context.runs.wake_claims()
    return True


async def cancel_orphans(context: EngineContext) -> None:
    """Cancel the unsettled children of settled parents: a parent settles, then cancels its
    children, and a crash between the two leaves them running for nobody."""
    parents: dict[str, Submission] = {}
    for child in await context.store.list_submissions(unsettled=True):
        parent_id = child.parent_submission_id
        if parent_id is None or child.cancel_requested_at is not None:
            continue
        if parent_id not in parents:
            parents[parent_id] = await context.store.get_submission(parent_id)
        if parents[parent_id].status is SubmissionStatus.SETTLED:
            await cancel_children(context, parents[parent_id])


class Coordinator:
    def __init__(self, context: EngineContext) -> None:
        self.context = context
        self.wake = context.runs.claims
        self.active: dict[str, asyncio.Task[None]] = {}  # conversation id -> its running attempt
        self._task: asyncio.Task[None] | None = None
        self._terminalizing: set[str] = set()
        self._liveness: OwnerLiveness | None = None
        """The store's liveness locks, once this worker holds its own."""
        self._waits_for_a_finish = True
        """A run's end may let a claim through that the store's wake-up alone would not (one
        was turned away for want of room, or for its session's run still winding down)."""
        self._reserved = 0
        """Slots held for admissions that claim what they admit (see :meth:`reserve`)."""
        self._claiming = False
        """Past start-up (liveness lock held, reconciliation done): claims may be made."""
        self._next: dict[str, Submission] = {}
        """Claimed at admission while the session's previous run here still winds down."""
        self._slotted: set[str] = set()
        """Claimed runs whose claim took their limits' slots (not started yet)."""
        self.serves = context.versions.serves()
        """What this worker's claims may take: per agent, the versions it runs."""

    async def start(self) -> None:
        """Hold this worker's liveness lock and say which versions it runs (before the
        runtime's start returns: what it reports counts this worker), then claim."""
        await self._hold_liveness()
        await self._announce()
        self._task = asyncio.create_task(self._loop(), name="tether-coordinator")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
        self._claiming = False
        if self.active:
            await asyncio.wait(
                set(self.active.values()), timeout=self.context.config.shutdown_timeout
            )
        self.context.limits.defers_give_back = False
        # The calls of this worker's tenant budget shares it never made: others may now.
        await self.context.tenant_budgets.give_back_shares()
        for waiting in self._next.values():  # claimed, never started: hand it back whole
            if waiting.id in self._slotted:  # its claim took its slots: they go back too
                self._slotted.discard(waiting.id)
                self.context.limits.forget_claimed(waiting)
            with contextlib.suppress(TetherError):
                await self.context.store.release(
                    waiting.id, attempt_id=str(waiting.attempt_id), refund_attempt=True
                )
        self._next.clear()
        with contextlib.suppress(TetherError):  # no claim to carry them: given back now
            await self.context.limits.flush_give_back()
        versions = self.context.capabilities.versions
        if versions is not None:
            with contextlib.suppress(TetherError):
                await versions.forget_worker(self.context.config.owner_id)
        if self._liveness is not None and not self.active:
            # Every run gave its claim back: nothing of ours for a peer to take over. (A run
            # still going keeps the lock until the store closes or the process ends.)
            with contextlib.suppress(TetherError):
                await self._liveness.release_liveness(self.context.config.owner_id)

    @property
    def holds_liveness(self) -> bool:
        """Whether this worker holds its liveness lock (``/readyz`` asks)."""
        return self._liveness is not None

    async def _hold_liveness(self) -> None:
        """Hold this worker's liveness lock before its first claim, for as long as it runs."""
        liveness = self.context.capabilities.liveness
        if liveness is None:
            return
        try:
            await liveness.hold_liveness(self.context.config.owner_id)
        except TetherError as exc:
            logger.warning("no liveness lock (%s): a crash will be taken over after a lease", exc)
            return
        self._liveness = liveness

    async def _announce(self) -> None:
        """Tell the store which versions this worker runs (``tether versions`` counts its
        workers by them), and wake the runs that waited for code that can go on: this
        worker's may be it."""
        context = self.context
        versions = context.capabilities.versions
        if versions is None:
            return
        try:
            await versions.put_worker(context.config.owner_id, self.serves, now=context.clock.now())
        except TetherError as exc:
            logger.warning("could not announce this worker's versions (%s)", exc)
        waits = context.capabilities.waits
        if waits is None:
            return
        counts = await versions.version_counts()  # grouped: no waiting row read for nothing
        if not any(count.wait_reason == VERSION_DIVERGED for count in counts):
            return
        for parked in await context.store.list_submissions(SubmissionStatus.WAITING):
            if parked.wait_reason == VERSION_DIVERGED and parked.key.agent in self.serves:
                with contextlib.suppress(ClaimLost):
                    await waits.unpark(parked.id)

    async def _loop(self) -> None:
        feed = self.context.capabilities.change_feed
        with contextlib.ExitStack() as stack:
            if feed is not None:  # admissions and settlements in any process
                stack.enter_context(feed.listen("work", self.wake))
            await self._claim_loop()

    async def _reconcile_at_start(self) -> None:
        """The start's reconciliation, tried again until the store lets it finish: a store
        that failed once (an I/O error) must not end the claim loop before it began (issue
        46's I/O-error loop found it did)."""
        while True:
            try:
                await self.reconcile()
                return
            except TetherError:
                logger.exception("reconciliation at start failed; retrying")
            await self.context.clock.wait_event(self.wake, self.context.config.claim_interval)
            self.wake.clear()

    async def _claim_loop(self) -> None:
        await self._reconcile_at_start()
        self._claiming = True
        self.context.limits.defers_give_back = True
        interval = self.context.config.claim_interval
        lease = self.context.config.lease
        clock = self.context.clock
        next_sweep = clock.monotonic() + lease
        # Expired leases are looked for on a clock, not on every wake-up: a busy change feed
        # wakes the loop per admission and settlement, and expiry is measured in leases anyway.
        reclaim_every = min(lease / 4, 1.0)
        next_reclaim = clock.monotonic()
        renew_every = self.context.config.heartbeat_interval
        next_renewal = clock.monotonic() + renew_every
        while True:
            try:
                if clock.monotonic() >= next_reclaim:
                    await self.reclaim_expired()
                    next_reclaim = clock.monotonic() + reclaim_every
                elif self._is_due():  # sooner than the sweep: a timer, a delayed dispatch
                    await self.fire_due()
                if clock.monotonic() >= next_renewal:
                    next_renewal = clock.monotonic() + renew_every
                    await self._renew_holds()
                await self.claim_runnable()
                if clock.monotonic() >= next_sweep:
                    await self.reconcile(stuck_only=True)
                    next_sweep = clock.monotonic() + lease
            except TetherError:
                logger.exception("claim loop pass failed; retrying")
            await clock.wait_event(self.wake, self._until_due(interval))
            self.wake.clear()

    async def _renew_holds(self) -> None:
        """This worker's limit slots and its shares of tenant budgets live by its heartbeat:
        a SIGKILLed worker's expire within a lease, and come back to the others
        (docs/limits.md, docs/budgets.md). Each is renewed whatever the other's renewal did,
        so that a call in flight keeps its reservation."""
        for renew in (self.context.limits.renew, self.context.tenant_budgets.renew):
            try:
                await renew()
            except TetherError:
                logger.exception("could not renew this worker's holds; retrying")

    async def reconcile(self, *, stuck_only: bool = False) -> None:
        """Finish every settlement a crash interrupted, from the payload it reserved.

        At start all of them; later (``stuck_only``) those found terminalizing on the previous
        sweep too, a lease ago, so a settlement that failed midway in a live process does not
        block its session until a restart. Finishing one twice is harmless: it is idempotent.
        Also requeue the waits that are over (see :func:`requeue_if_stranded`): at start all
        of them, on a sweep the waits for children (a wake a crash cut, were there one); and
        at start cancel the children of settled parents (see :func:`cancel_orphans`).
        """
        store = self.context.store
        for waiting in await store.list_submissions(SubmissionStatus.WAITING):
            if stuck_only and waiting.wait_reason != WAIT_FOR_CHILDREN:
                continue  # a gate's decision commits with its wake-up: found at start only
            try:
                await requeue_if_stranded(self.context, waiting)
            except TetherError:  # one unreadable log must not keep the others waiting
                fields = Correlation.of(waiting).log_fields()
                logger.exception("could not check whether %s still waits", waiting.id, extra=fields)
        if not stuck_only:
            try:
                await cancel_orphans(self.context)
            except TetherError:
                logger.exception("could not cancel the children of settled parents")
        found = await store.list_submissions(SubmissionStatus.TERMINALIZING)
        stuck = [s for s in found if s.id in self._terminalizing] if stuck_only else found
        self._terminalizing = {s.id for s in found}
        for submission in stuck:
            if submission.conversation_id in self.active:
                continue  # ours, still settling
            payload = (
                SubmissionSettled.model_validate(submission.settlement)
                if submission.settlement is not None
                else failed(
                    SETTLEMENT_INDETERMINATE, "the process stopped while settling; outcome unknown"
                )
            )
            if (await store.get_submission(submission.id)).status is not (
                SubmissionStatus.TERMINALIZING
            ):
                continue  # finished since it was listed (by its own attempt, or a peer)
            correlation = Correlation.of(submission)
            await self.context.instrumentation.emit(
                RecoveryDecided(correlation, decision="finish_settlement", detail=payload.status)
            )
            try:
                await finish_reserved(
                    store,
                    submission,
                    payload,
                    clock=self.context.clock,
                    view=self.context.views.get(submission.conversation_id),
                )
            except Fenced:
                continue  # another process is finishing it under a newer fence: let it
            settlement = payload.to_json_object()
            self.context.runs.notify_settled(submission.id, settlement)
            await self.context.instrumentation.emit(
                SubmissionSettledEvent(
                    correlation,
                    settlement=settlement,
                    admitted_at=submission.created_at,
                    settled_at=self.context.clock.now(),
                )
            )
            if self.context.subagents.targets(submission.key.agent, submission.depth):
                await cancel_children(self.context, submission)  # as its attempt would have

    async def reclaim_expired(self) -> None:
        """Release the claims whose lease expired, and (where the store offers liveness
        locks) at once every claim of a worker whose lock is free: its process died. Fire
        what is due (see :meth:`fire_due`)."""
        store = self.context.store
        await self.fire_due()
        lost = [
            (submission, "lease_expired", "lease expired")
            for submission in await store.list_expired_leases(self.context.clock.now())
        ]
        dead: set[str] = set()
        liveness = self._liveness
        if liveness is not None:
            expired = {submission.id for submission, _, _ in lost}
            running = [
                submission
                for submission in await store.list_submissions(SubmissionStatus.RUNNING)
                if submission.id not in expired and submission.owner_id
            ]
            owners = {str(s.owner_id) for s in running} - {self.context.config.owner_id}
            dead = await liveness.dead_owners(owners) if owners else set()
            lost += [
                (s, "owner_died", f"worker {s.owner_id} died")
                for s in running
                if s.owner_id in dead
            ]
        for submission, decision, why in lost:
            if submission.conversation_id in self.active:
                continue  # ours and still running: its heartbeat will renew or give it up
            with contextlib.suppress(ClaimLost):
                await store.release(
                    submission.id, attempt_id=str(submission.attempt_id), last_error=why
                )
                correlation = Correlation.of(submission)
                detail = "released" if decision == "lease_expired" else f"released: {why}"
                await self.context.instrumentation.emit(
                    RecoveryDecided(correlation, decision=decision, detail=detail)
                )
        if liveness is not None:
            for owner_id in dead:  # its claims are released: nothing of it is left to find
                await self.context.limits.forget_owner(owner_id)  # nor its limits' slots
                await liveness.forget_owner(owner_id)

    def _is_due(self) -> bool:
        due = self.context.runs.next_due
        return due is not None and due <= self.context.clock.now()

    def _until_due(self, interval: float) -> float:
        """How long the loop may sleep: ``interval``, or less when something is due sooner."""
        due = self.context.runs.next_due
        if due is None:
            return interval
        return max(0.0, min(interval, (due - self.context.clock.now()).total_seconds()))

    async def fire_due(self) -> None:
        """Fire what is due, each at most once whichever worker gets to it first: requeue the
        waits past their time (a timer, a wait for children past its deadline; the resume
        lands the lapse) and release the delayed dispatches due (scheduled → queued); then
        learn from the store when the next thing is due, for the loop to sleep until then
        (a peer's timer included: this sweep runs at least every second)."""
        context = self.context
        now = context.clock.now()
        waits = context.capabilities.waits
        for waiting in await waits.list_expired_waits(now) if waits else ():
            await requeue_if_stranded(context, waiting)
        timers = context.capabilities.timers
        if timers is None:
            context.runs.next_due = None
            return
        for released in await timers.release_due(now):
            await context.instrumentation.emit(
                RecoveryDecided(Correlation.of(released), decision="scheduled_due", detail="due")
            )
            context.runs.wake_claims()
        due = await timers.next_due()
        # One not requeued though due (a peer woke it meanwhile, or a cancel did) is looked
        # at again on the next sweep, not on every pass.
        context.runs.next_due = due if due is not None and due > now else None

    async def claim_runnable(self) -> None:
        context = self.context
        free = context.config.max_concurrent_runs - len(self.active) - self._reserved
        # Without a change feed, only a run's end says that its session's next head is up.
        self._waits_for_a_finish = free <= 0 or context.capabilities.change_feed is None
        if free <= 0 or context.closing:
            await context.limits.flush_give_back()  # no claim to carry them
            return
        now = context.clock.now()
        started = context.clock.monotonic()
        # One batch: on PostgreSQL it skips heads other workers are taking instead of waiting.
        held_back = await context.limits.held_back()
        limited = context.capabilities.limits
        slots = context.limits.claim_slots() if limited is not None else None
        if (held_back is not None or slots is not None) and limited is not None:
            # Limits (docs/limits.md): the heads of agents and tenants at their limit of
            # runs in flight are passed over, in the claim itself; the runs it claims take
            # their slots in its transaction, and the runs that ended give theirs back.
            try:
                claimed = await limited.claim_runnable(
                    attempt_ids=UlidsOnDemand(free),
                    owner_id=context.config.owner_id,
                    lease_expires_at=now + timedelta(seconds=context.config.lease),
                    now=now,
                    serves=self.serves,
                    held_back=held_back,
                    slots=slots,
                )
            except BaseException:
                if slots is not None:
                    context.limits.claim_failed(slots)
                raise
        else:
            claimed = await context.store.claim_runnable(
                attempt_ids=UlidsOnDemand(free),
                owner_id=context.config.owner_id,
                lease_expires_at=now + timedelta(seconds=context.config.lease),
                now=now,
                serves=self.serves,
            )
        if claimed:  # a pass that found nothing committed nothing (SQLite reads a hint first)
            context.metrics.commit("claim", context.clock.monotonic() - started)
        if len(claimed) >= free:
            # Every slot taken: more may be runnable, and a settlement announces only its own
            # session's next head, so the next look is when a run of ours ends.
            self._waits_for_a_finish = True
        for head in claimed:
            submission = head.submission
            if head.slots_refused:
                # Its agent or tenant reached its limit as the claim decided (another
                # worker took the last slot): given back, not counted as an attempt.
                with contextlib.suppress(ClaimLost):
                    await context.store.release(
                        submission.id, attempt_id=str(submission.attempt_id), refund_attempt=True
                    )
                continue
            if slots is not None:
                self._slotted.add(submission.id)
            if submission.conversation_id in self.active:
                # Its session's previous run here (the one before it, settled, or its own
                # previous attempt, released) is still winding down: not twice at once. The
                # claim is kept and the run starts when that one ends, as at admission: given
                # back and made again, it would leave in the submission's attempts one that
                # never ran, and cost two more commits and a fence.
                if submission.conversation_id not in self._next:
                    self._next[submission.conversation_id] = submission
                    continue
                # Never: one claim a session at a time, and that one is held already.
                if submission.id in self._slotted:  # its slots go back with its claim
                    self._slotted.discard(submission.id)
                    context.limits.forget_claimed(submission)
                with contextlib.suppress(ClaimLost):
                    await context.store.release(
                        submission.id, attempt_id=str(submission.attempt_id), refund_attempt=True
                    )
                continue
            self._start(submission, known_clear=head.alone)

    @contextlib.contextmanager
    def reserve(self) -> Iterator[bool]:
        """Hold a slot for an admission that would claim what it admits: true if one is free
        (then the admission must :meth:`adopt` what it claimed before leaving)."""
        context = self.context
        free = context.config.max_concurrent_runs - len(self.active) - self._reserved
        if free <= 0 or context.closing or not self._claiming:
            yield False
            return
        self._reserved += 1
        try:
            yield True
        finally:
            self._reserved -= 1

    def adopt(self, submission: Submission, *, slotted: bool = False) -> None:
        """Run a submission claimed at its admission, as the claim loop runs what it claims;
        ``slotted``: its claim took its limits' slots."""
        if self.context.closing:
            # Shutting down: not started, it is handed back with whatever did not start.
            if slotted:
                self.context.limits.forget_claimed(submission)  # and its slots with it
            self._next.setdefault(submission.conversation_id, submission)
            return
        if slotted:
            self._slotted.add(submission.id)
        if submission.conversation_id in self.active:
            # Its session's previous run here has settled (else this were not the head) and
            # is still winding down: this one starts when it ends, never beside it.
            self._next[submission.conversation_id] = submission
            return
        # Claimed with nothing else of its session unsettled: no steer can predate it.
        self._start(submission, known_clear=True)

    def _start(
        self, submission: Submission, *, known_clear: bool = False, held: bool = False
    ) -> None:
        """Run a claimed submission; ``held``: its claim waited for its session's previous
        run to end, unrenewed, so it may have been taken over meanwhile."""
        context = self.context
        watch = context.steering.open(
            submission.conversation_id,
            feed=context.capabilities.change_feed,
            known_clear=known_clear,
        )
        context.runs.starting(submission.id)
        task = asyncio.create_task(
            self._run(submission, watch, held=held), name=f"tether-run-{submission.id}"
        )
        self.active[submission.conversation_id] = task
        task.add_done_callback(functools.partial(self._finished, submission, watch))

    async def _run(self, submission: Submission, watch: SteerWatch, *, held: bool) -> None:
        context = self.context
        limits = context.limits
        claimed = submission.id in self._slotted
        self._slotted.discard(submission.id)
        if held and not await self._still_ours(submission):
            if claimed:
                limits.forget_claimed(submission)
            return
        if not await limits.take_run(submission, claimed=claimed):
            # Its agent or tenant reached its limit since the claim looked (another worker
            # took the last slot): given back, not counted as an attempt, and passed over
            # by the next claims until a slot is free.
            with contextlib.suppress(ClaimLost):
                await context.store.release(
                    submission.id, attempt_id=str(submission.attempt_id), refund_attempt=True
                )
            return
        try:
            await self._claimed(submission, watch)
        finally:
            if await limits.give_back_run(submission):
                # A slot is free only now, after the settlement's wake-up (which a claim
                # may have heard while the slot was still held): look again.
                self.wake.set()

    async def _still_ours(self, submission: Submission) -> bool:
        """Whether a held claim is still this worker's as its run starts, its lease renewed
        if little of it is left. Held unrenewed while its session's previous run wound down
        (longer than a lease if this process was frozen), it may have been taken over: a run
        started on it would read the other worker's log and call its model again before its
        first write was refused. The usual case, a conversation's next message sent once the
        previous one settled, has most of its lease left and costs no extra commit."""
        return await Lease(self.context, submission).confirm()

    async def _claimed(self, submission: Submission, watch: SteerWatch) -> None:
        context = self.context
        await context.instrumentation.emit(
            SubmissionClaimed(
                Correlation.of(submission),
                owner_id=context.config.owner_id,
                attempt_count=submission.attempt_count,
            )
        )
        await run_attempt(context, submission, watch)

    def _finished(
        self, submission: Submission, watch: SteerWatch, _task: asyncio.Task[None]
    ) -> None:
        conversation_id = submission.conversation_id
        self.context.runs.finished(submission.id)
        self.context.steering.close(conversation_id, watch)
        self.active.pop(conversation_id, None)
        if conversation_id in self._next and not self.context.closing:
            # closing: stop() gives it back
            self._start(self._next.pop(conversation_id), held=True)
        if self._waits_for_a_finish:
            self.wake.set()  # a session head or a slot just freed up
