"""The runtime: durable submissions in, settlements out, however processes die.

Example::

    runtime = Runtime(
        agents={"assistant": AgentDefinition(lambda instance, env: AgentSpec(harness=MyHarness()))},
        store="sqlite:///./tether-data",
    )
    async with runtime:
        receipt = await runtime.dispatch("assistant", "acme", "What is the weather?")
        settlement = await runtime.wait(receipt.submission_id)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Literal, Self, cast

from pydantic import JsonValue

from tether._conformance import implements
from tether._ids import new_ulid
from tether.engine._approvals import ApprovalPage, approval_page
from tether.engine._attempt import _Stop
from tether.engine._config import AgentDefinition, RuntimeConfig
from tether.engine._coordinator import Coordinator, requeue_if_stranded
from tether.engine._eventlog import log_event
from tether.engine._fork import Fork
from tether.engine._inbound import Inbound, parse_inbound
from tether.engine._observe import (
    ApprovalDecided,
    Correlation,
    Instrumentation,
    Interceptor,
    Observer,
    SubmissionAdmitted,
)
from tether.engine._redact import Redactor, SecretRedactor
from tether.engine._steering import SteerWatches
from tether.engine._trace import trace_context
from tether.engine._usage import UsageTotals, total_usage
from tether.errors import (
    ApprovalNotFound,
    ConversationNotFound,
    InvalidDispatch,
    InvalidSeq,
    NoRunInFlight,
    RuntimeClosed,
    SessionBusy,
    SubmissionNotFound,
    UnknownAgent,
)
from tether.journal import Decision, Journal, LogView
from tether.messages import Message
from tether.records import Record
from tether.store import (
    MAX_SEQ,
    Admission,
    Attempt,
    ChangeFeed,
    Conversation,
    GateStatus,
    NewSubmission,
    SessionKey,
    Store,
    Submission,
    SubmissionStatus,
    open_store,
)

__all__ = ("Multitask", "Receipt", "Runtime", "SubmissionInfo")

Multitask = Literal["enqueue", "reject", "interrupt", "steer"]
_WAIT_POLL = 0.25
_VIEWS_KEPT = 512
_VIEW_BYTES_KEPT = 4 * 1024 * 1024
_PLACEHOLDER_BYTES = 64
_VIEW_RECOUNT_EVERY = 16
_NAME_LIMIT = 200
_AT_REST = frozenset({SubmissionStatus.SETTLED, SubmissionStatus.WAITING})


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a dispatch returns; ``created`` is false for an idempotent replay."""

    submission_id: str
    conversation_id: str
    session: str
    created: bool = True


@dataclass(frozen=True, slots=True)
class SubmissionInfo:
    submission: Submission
    attempts: list[Attempt]

    @property
    def status(self) -> SubmissionStatus:
        return self.submission.status

    @property
    def settlement(self) -> Mapping[str, Any] | None:
        return self.submission.settlement


@dataclass(slots=True)
class _Run:
    task: asyncio.Task[Any]
    stop: _Stop
    wake: asyncio.Future[None]


def _set_event(event: asyncio.Event, _: object) -> None:
    event.set()


def _adopt_claimed(
    coordinator: Coordinator, attempt_id: str, claiming: asyncio.Future[Admission]
) -> None:
    """Start what an admission claimed, as soon as its commit is known (awaited or not)."""
    if claiming.cancelled() or claiming.exception() is not None:
        return
    submission = claiming.result().submission
    if submission.attempt_id == attempt_id:
        coordinator.adopt(submission)


def check_seq(value: int, *, field: str, least: int = 0) -> int:
    """``value`` if it can name a record position, else ``InvalidSeq`` (never a store's
    overflow)."""
    if not least <= value <= MAX_SEQ:
        raise InvalidSeq(value, field=field, least=least)
    return value


def _check_name(kind: str, value: str) -> None:
    if not value or len(value) > _NAME_LIMIT or "/" in value or not value.isprintable():
        raise InvalidDispatch(
            f"must be 1-{_NAME_LIMIT} printable characters without '/'", field=kind
        )


class Runtime:
    """Durable agent sessions over a store (docs/architecture.md §6)."""

    def __init__(
        self,
        agents: Mapping[str, AgentDefinition],
        store: Store | str = "sqlite:///./tether-data",
        *,
        config: RuntimeConfig | None = None,
        observers: Sequence[Observer] = (),
        interceptors: Sequence[Interceptor] = (),
        **settings: Any,
    ) -> None:
        for name in agents:
            _check_name("agent", name)
        self.agents = dict(agents)
        self._store_source = store
        self._store: Store | None = store if not isinstance(store, str) else None
        self.config = replace(config or RuntimeConfig(), **settings)
        self.redact: Redactor = self.config.redact or SecretRedactor.from_env(
            os.environ, self.config.env
        )
        self.instrumentation = Instrumentation(
            [log_event, *observers], interceptors, redact=self.redact
        )
        self.closing = False
        self._started = False
        self._coordinator: Coordinator | None = None
        self._runs: dict[str, _Run] = {}
        self._settled: dict[str, asyncio.Future[dict[str, JsonValue]]] = {}
        self._waiting: dict[str, int] = {}  # wait() calls in progress, by submission id
        self._zombies: set[asyncio.Task[Any]] = set()
        self.steering = SteerWatches(poll=self.config.claim_interval)
        """What running attempts have heard of steering (see :mod:`._steering`)."""
        self._views: OrderedDict[str, LogView] = OrderedDict()
        # id -> (records counted, their bytes, the first of them)
        self._view_sizes: dict[str, tuple[int, int, object]] = {}
        self._view_bytes = 0
        self._view_calls = 0
        self._handed_out: set[str] = set()  # views handed out since the last full count
        self.view_cache_bytes = _VIEW_BYTES_KEPT
        """The encoded bytes of records the kept views may hold together (the newest view
        is kept whatever its size); views past it, or past ``_VIEWS_KEPT``, are dropped
        least recently used first and read again from the store when next needed."""

    # --- lifecycle --------------------------------------------------------------------

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeClosed("the runtime has not been started")
        return self._store

    @property
    def change_feed(self) -> ChangeFeed | None:
        """The store, if it has a change feed (wake-ups from other processes)."""
        store = self.store
        return cast(ChangeFeed, store) if implements(store, ChangeFeed) else None

    async def start(self, *, worker: bool = True) -> None:
        """Open the store and (unless ``worker=False``, an API-only node) start the coordinator."""
        if self._started:
            raise RuntimeError("the runtime is already started")
        if self.closing:
            raise RuntimeClosed("the runtime is closed")
        if self._store is None:
            assert isinstance(self._store_source, str)
            self._store = await open_store(self._store_source)
        self._started = True
        if worker:
            self._coordinator = Coordinator(self)
            self._coordinator.start()

    async def close(self) -> None:
        """Stop claiming, release running work without burning an attempt, close an owned store."""
        if self.closing:
            return
        self.closing = True
        for run in self._runs.values():
            if not run.wake.done():
                run.wake.set_result(None)
        if self._coordinator is not None:
            await self._coordinator.stop()
        for zombie in self._zombies:
            zombie.cancel()
        if self._zombies:
            await asyncio.wait(self._zombies, timeout=1)
        if isinstance(self._store_source, str) and self._store is not None:
            await self._store.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def ready(self) -> None:
        """Return once the store has committed a small write (:meth:`Store.ping`); raise
        ``StoreUnavailable`` if it cannot write (a full disk, a lost database), or
        ``RuntimeClosed``. What ``/readyz`` asks.

        Example::

            await runtime.ready()
        """
        await self._check_open().ping()

    def _check_open(self) -> Store:
        if self.closing:
            raise RuntimeClosed("the runtime is closed")
        return self.store

    def _wake(self) -> None:
        if self._coordinator is not None:
            self._coordinator.wake.set()

    # --- hooks for attempts -----------------------------------------------------------

    def register_run(self, submission: Submission, task: asyncio.Task[Any], stop: _Stop) -> None:
        self._runs[submission.id] = _Run(task, stop, asyncio.get_running_loop().create_future())

    def unregister_run(self, submission: Submission) -> None:
        self._runs.pop(submission.id, None)

    def shutdown_signal(self, submission: Submission) -> asyncio.Future[None]:
        """Resolves when this run should stop now (shutdown or an in-process abort)."""
        return self._runs[submission.id].wake

    def adopt_zombie(self, task: asyncio.Task[Any]) -> None:
        """Keep a run that ignored its cancellation until it ends; whatever it raises then is
        moot (its work was settled over it) and is retrieved, not logged as never retrieved."""
        self._zombies.add(task)
        task.add_done_callback(self._bury)

    def _bury(self, task: asyncio.Task[Any]) -> None:
        self._zombies.discard(task)
        if not task.cancelled():
            task.exception()

    def view(self, conversation_id: str) -> LogView:
        """This process's incremental view of a conversation (kept for the most recent ones,
        bounded by count and by the encoded size of their records)."""
        kept = self._views.pop(conversation_id, None)
        view = kept or LogView()
        self._views[conversation_id] = view
        self._view_calls += 1
        # Views grow after they are handed out (a refresh, a journal's appends). Those handed
        # out since the last full count are counted on every call, all of them every so often
        # (a run holds its view for long): a call costs what changed, not the cache's size.
        if self._view_calls % _VIEW_RECOUNT_EVERY == 0:
            self._handed_out.clear()
            for kept_id, kept_view in self._views.items():
                self._count_view_bytes(kept_id, kept_view)
        else:
            self._handed_out.add(conversation_id)
            for handed_id in self._handed_out:
                handed = self._views.get(handed_id)
                if handed is not None:
                    self._count_view_bytes(handed_id, handed)
        while len(self._views) > 1 and (
            len(self._views) > _VIEWS_KEPT or self._view_bytes > self.view_cache_bytes
        ):
            forgotten, _ = self._views.popitem(last=False)
            self._view_bytes -= self._view_sizes.pop(forgotten, (0, 0, None))[1]
            self._handed_out.discard(forgotten)
        return view

    def _count_view_bytes(self, conversation_id: str, view: LogView) -> None:
        """Bring a view's byte count up to date, counting only records new since last time
        (all of them again if its first record changed: it started over, or a full refresh
        put the records a lean one had left as placeholders in their place)."""
        records = view.records
        first = records[0] if records else None
        counted, before, first_counted = self._view_sizes.get(conversation_id, (0, 0, None))
        if first is not first_counted or counted > len(records):
            counted, size = 0, 0
        else:
            size = before
        # A lean view's placeholders (not Records) count for the little they hold.
        size += sum(
            len(record.canonical) if isinstance(record, Record) else _PLACEHOLDER_BYTES
            for record in records[counted:]
        )
        self._view_sizes[conversation_id] = (len(records), size, first)
        self._view_bytes += size - before

    def notify_settled(self, submission_id: str, settlement: Mapping[str, JsonValue]) -> None:
        """Hand a just-finalized settlement to in-process waiters (others poll the store)."""
        waiter = self._settled.pop(submission_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(dict(settlement))

    # --- admission --------------------------------------------------------------------

    async def dispatch(
        self,
        agent: str,
        instance: str,
        message: Inbound | str | Mapping[str, Any],
        *,
        session: str = "default",
        dispatch_id: str | None = None,
        multitask: Multitask = "enqueue",
        trace: Mapping[str, str] | None = None,
    ) -> Receipt:
        """Admit a message for ``agent/instance/session``; durable when this returns.

        ``dispatch_id`` makes it idempotent within the session key. ``multitask`` says what
        to do if the session is busy: ``enqueue`` (run after), ``reject`` (``SessionBusy``),
        ``interrupt`` (abort what runs, then run), ``steer`` (join the running execution).
        ``trace`` is the caller's W3C trace context (``traceparent``, ``tracestate``): every
        attempt, recovered ones included, joins that trace (a malformed one is ignored).
        """
        self._check_open()
        if agent not in self.agents:
            raise UnknownAgent(agent)
        _check_name("instance", instance)
        _check_name("session", session)
        if dispatch_id is not None and not (0 < len(dispatch_id) <= _NAME_LIMIT):
            raise InvalidDispatch(f"must be 1-{_NAME_LIMIT} characters", field="dispatchId")
        inbound = parse_inbound(message)
        key = SessionKey(agent, instance, session)
        if multitask != "enqueue" and inbound.kind in ("user", "signal"):
            busy = await self._unsettled(key)
            if busy and multitask == "reject":
                raise SessionBusy(f"session {key} is running {busy[0].id}")
            if busy and multitask == "interrupt":
                for submission in busy:
                    await self._cancel(submission)
            if busy and multitask == "steer":
                inbound = inbound.model_copy(update={"kind": "steer"})
        return await self._admit(key, inbound, dispatch_id, trace_context(trace))

    async def _admit(
        self,
        key: SessionKey,
        inbound: Inbound,
        dispatch_id: str | None,
        trace: Mapping[str, str] | None = None,
    ) -> Receipt:
        now = datetime.now(UTC)
        new = NewSubmission(
            id=new_ulid(),
            key=key,
            conversation_id=new_ulid(),
            input=inbound.to_json_object(),
            created_at=now,
            dispatch_id=dispatch_id,
            trace=trace,
        )
        coordinator = self._coordinator
        with (
            coordinator.reserve() if coordinator is not None else contextlib.nullcontext(False)
        ) as room:
            attempt_id = new_ulid() if room else None
            if attempt_id is not None and coordinator is not None:
                admission = await self._admit_and_claim(coordinator, new, attempt_id)
            else:
                admission = await self.store.admit(new)
            submission = admission.submission
            claimed = attempt_id is not None and submission.attempt_id == attempt_id
            correlation = Correlation.of(submission)
            try:
                await self.instrumentation.emit(
                    SubmissionAdmitted(
                        correlation, input=dict(submission.input), created=admission.created
                    )
                )
            finally:  # admitted, then claimed: observers hear it in that order
                if claimed and coordinator is not None:
                    coordinator.adopt(submission)
            if not claimed:
                self._wake()
            if inbound.kind in ("steer", "follow_up"):
                self.steering.heard(submission.conversation_id)  # durable now: worth a look
        return Receipt(submission.id, submission.conversation_id, key.session, admission.created)

    async def _admit_and_claim(
        self, coordinator: Coordinator, new: NewSubmission, attempt_id: str
    ) -> Admission:
        """Admit, claiming in the same commit if the session is free; the caller runs what
        was claimed. The commit is shielded: a caller that gives up meanwhile (a shutdown, a
        client gone) must not leave a claim that nobody runs, so it is run once known."""
        claiming = asyncio.ensure_future(
            self.store.admit_and_claim(
                new,
                attempt_id=attempt_id,
                owner_id=self.config.owner_id,
                lease_expires_at=new.created_at + timedelta(seconds=self.config.lease),
                now=new.created_at,
            )
        )
        try:
            return await asyncio.shield(claiming)
        except asyncio.CancelledError:
            claiming.add_done_callback(functools.partial(_adopt_claimed, coordinator, attempt_id))
            raise

    async def _unsettled(self, key: SessionKey) -> list[Submission]:
        try:
            conversation = await self.store.find_conversation(key)
        except ConversationNotFound:
            return []
        return await self.store.list_submissions(conversation_id=conversation.id, unsettled=True)

    async def _cancel(self, submission: Submission) -> None:
        await self.store.request_cancel(submission.id, now=datetime.now(UTC))
        run = self._runs.get(submission.id)
        if run is not None:
            run.stop.reason = "aborted"
            if not run.wake.done():
                run.wake.set_result(None)

    async def steer(
        self,
        agent: str,
        instance: str,
        message: Inbound | str | Mapping[str, Any],
        *,
        session: str = "default",
    ) -> Receipt:
        """Deliver a message into the running execution at its next safe point (durable)."""
        return await self._inject("steer", agent, instance, message, session)

    async def follow_up(
        self,
        agent: str,
        instance: str,
        message: Inbound | str | Mapping[str, Any],
        *,
        session: str = "default",
    ) -> Receipt:
        """Queue a message for the running execution to take once its current answer is done."""
        return await self._inject("follow_up", agent, instance, message, session)

    async def _inject(
        self,
        kind: str,
        agent: str,
        instance: str,
        message: Inbound | str | Mapping[str, Any],
        session: str,
    ) -> Receipt:
        self._check_open()
        if agent not in self.agents:
            raise UnknownAgent(agent)
        inbound = parse_inbound(message)
        key = SessionKey(agent, instance, session)
        busy = [
            s
            for s in await self._unsettled(key)
            if Inbound.model_validate(s.input).kind in ("user", "signal")
        ]
        if not busy:
            raise NoRunInFlight(f"nothing is running in session {key}")
        return await self._admit(key, inbound.model_copy(update={"kind": kind}), None)

    async def abort(self, agent: str, instance: str, *, session: str = "default") -> list[str]:
        """Abort every unsettled submission of the session (each settles ``aborted``)."""
        self._check_open()
        busy = await self._unsettled(SessionKey(agent, instance, session))
        for submission in busy:
            await self._cancel(submission)
        self._wake()
        return [s.id for s in busy]

    async def compact(
        self, agent: str, instance: str, *, session: str = "default", dispatch_id: str | None = None
    ) -> Receipt:
        """Queue a compaction of the session's history (it runs in order with the messages)."""
        self._check_open()
        if agent not in self.agents:
            raise UnknownAgent(agent)
        key = SessionKey(agent, instance, session)
        await self.store.find_conversation(key)  # ConversationNotFound: nothing to compact
        return await self._admit(key, Inbound(kind="compact"), dispatch_id)

    # --- reading ----------------------------------------------------------------------

    async def submission(self, submission_id: str) -> SubmissionInfo:
        store = self._check_open()
        submission = await store.get_submission(submission_id)
        return SubmissionInfo(submission, await store.list_attempts(submission_id))

    async def wait(self, submission_id: str) -> dict[str, JsonValue]:
        """The settled payload, once the submission settles; works across processes and
        restarts (it reads the store; a store with a change feed wakes it at once, others
        are polled). Bound it with ``asyncio.timeout``."""
        store = self._check_open()
        feed = self.change_feed
        # Waiters of one submission share its future; the last one out removes it, however
        # it leaves (settled, unknown id, timed out, or on a node that runs no attempts).
        self._waiting[submission_id] = self._waiting.get(submission_id, 0) + 1
        try:
            while True:
                waiter = self._settled.get(submission_id)
                if waiter is None or waiter.done():
                    waiter = asyncio.get_running_loop().create_future()
                    self._settled[submission_id] = waiter
                woken = asyncio.Event()
                wake = functools.partial(_set_event, woken)
                waiter.add_done_callback(wake)
                try:
                    with (
                        feed.listen(f"settled:{submission_id}", woken)
                        if feed is not None
                        else contextlib.nullcontext()
                    ):
                        submission = await store.get_submission(submission_id)
                        if (
                            submission.status is SubmissionStatus.SETTLED
                            and submission.settlement is not None
                        ):
                            return dict(submission.settlement)
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(_WAIT_POLL):
                                await woken.wait()
                finally:
                    waiter.remove_done_callback(wake)
                if not waiter.done() and submission_id in self._runs:
                    # Its attempt runs here and hands the settlement over once it has
                    # finished: a change feed's wake-up at the commit need not send us to
                    # the store for it.
                    await asyncio.wait({waiter}, timeout=_WAIT_POLL)
                if waiter.done() and not waiter.cancelled():
                    return dict(waiter.result())  # settled in this process: the payload is here
        finally:
            left = self._waiting.pop(submission_id) - 1
            if left:
                self._waiting[submission_id] = left
            else:
                self._settled.pop(submission_id, None)

    async def records(
        self, conversation_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[Record]:
        check_seq(after, field="after")
        return await self._check_open().read(conversation_id, after_seq=after, limit=limit)

    async def messages(self, conversation_id: str) -> list[Message]:
        """The session's history as the model sees it next turn (compactions applied).

        Example::

            conversation = await runtime.conversation("assistant", "acme")
            for message in await runtime.messages(conversation.id):
                print(message.role, message.text)
        """
        view = self.view(conversation_id)
        await view.refresh(self._check_open(), conversation_id)
        return view.messages()

    async def verify(self, conversation_id: str) -> int:
        """Re-derive a conversation's whole hash chain; the number of records it holds
        (``LogTampered`` if a record was altered, ``ConversationNotFound``)."""
        return await self._check_open().verify(conversation_id)

    async def wait_for_append(self, conversation_id: str, *, after: int) -> int:
        """Wait until the conversation's log passes seq ``after``; return its new head.
        Wakes at once for appends in this process and, with a change feed, in others.
        Bound it with ``asyncio.timeout``."""
        check_seq(after, field="after")
        return await self._check_open().wait_for_append(conversation_id, after_seq=after)

    async def at_rest(self, conversation_id: str) -> bool:
        """Whether nothing of the conversation is queued or running: every submission is
        settled or parked (for a human, or for a child task, which may take days)."""
        unsettled = await self._check_open().list_submissions(
            conversation_id=conversation_id, unsettled=True
        )
        return all(s.status in _AT_REST for s in unsettled)

    async def usage(self, conversation_id: str, *, submission_id: str | None = None) -> UsageTotals:
        """Token usage and cost of a session's model calls, or of one submission's."""
        view = self.view(conversation_id)
        await view.refresh(self._check_open(), conversation_id)
        return total_usage(view.records, submission_id=submission_id)

    async def conversation(
        self, agent: str, instance: str, *, session: str = "default"
    ) -> Conversation:
        """The conversation behind a session key (``UnknownAgent``, ``ConversationNotFound``)."""
        store = self._check_open()
        if agent not in self.agents:
            raise UnknownAgent(agent)
        return await store.find_conversation(SessionKey(agent, instance, session))

    # --- approvals and forks ----------------------------------------------------------

    async def approvals(
        self,
        *,
        status: GateStatus | None = GateStatus.PENDING,
        agent: str | None = None,
        instance: str | None = None,
        tool: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> ApprovalPage:
        """A page of approval gates, oldest request first, from the store's gate index (no
        log is read): by default those waiting for a decision; ``status=None`` lists every
        status, ``GateStatus.DECIDED`` the decisions made (the audit trail). ``cursor`` is a
        page's ``next_cursor`` (``InvalidCursor`` for anything else); ``limit`` 1..1000.

        Example::

            page = await runtime.approvals(agent="support")
            for gate in page.gates:
                await runtime.approve(gate.approval_id, "approve", approver="ann")
        """
        return await approval_page(
            self._check_open(),
            status=status,
            agent=agent,
            instance=instance,
            tool=tool,
            limit=limit,
            cursor=cursor,
        )

    async def approve(
        self,
        approval_id: str,
        decision: Decision,
        *,
        approver: str,
        reason: str | None = None,
        args: dict[str, JsonValue] | None = None,
    ) -> Record:
        """Decide a parked tool call and requeue its submission, in one commit.

        Idempotent: the same decision again (concurrently too) returns the same record; a
        different one raises ``ApprovalConflict``. An ``edit`` whose ``args`` do not fit the
        tool's parameters schema raises ``InvalidEditArgs`` and writes nothing.
        """
        store = self._check_open()
        conversation_id, _, _ = approval_id.rpartition(".")
        if not conversation_id:
            raise ApprovalNotFound(approval_id)
        # fence=0: opening must not supersede a run that a decision already resumed; the
        # decision commits at a fence of its own, and only when there is one to write.
        journal = await Journal.open(
            store, conversation_id, fence=0, view=self.view(conversation_id)
        )
        record = await journal.approve(
            approval_id, decision, approver=approver, reason=reason, args=args
        )
        if record.submission_id is not None:
            # Repeating a decision an earlier version wrote without its wake-up finishes it.
            with contextlib.suppress(SubmissionNotFound):
                await requeue_if_stranded(self, await store.get_submission(record.submission_id))
        self._wake()
        correlation = Correlation(
            journal.conversation.key, conversation_id, record.submission_id or ""
        )
        await self.instrumentation.emit(
            ApprovalDecided(
                correlation,
                approval_id=approval_id,
                decision=decision,
                approver=approver,
                reason=reason,
            )
        )
        return record

    async def fork(self, conversation_id: str, *, at_seq: int, session: str | None = None) -> Fork:
        """A new session whose log starts with this conversation's first ``at_seq`` records.

        A cut inside an execution is repaired as recovery would (``Fork.repaired``): a tool
        call separated from its result gets an ``unknown`` one, so the fork's next turn sees
        a whole history."""
        store = self._check_open()
        check_seq(at_seq, field="atSeq", least=1)
        parent = await store.get_conversation(conversation_id)
        name = session or f"fork-{new_ulid().lower()}"
        _check_name("session", name)
        key = SessionKey(parent.key.agent, parent.key.instance, name)
        child = await store.fork(
            conversation_id,
            at_seq=at_seq,
            key=key,
            new_conversation_id=new_ulid(),
            created_at=datetime.now(UTC),
        )
        journal = await Journal.open(store, child.id, fence=0, view=self.view(child.id))
        return Fork.of(child, tuple(await journal.repair_cut()))
