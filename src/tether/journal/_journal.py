"""The journal of one conversation: exec, replay, resume, fork, approvals, verify.

Example::

    journal = await Journal.open(store, conversation_id, model=model, tools=tools)
    result = await journal.exec(harness, [UserMessage(body="hi")])
    assert await Journal.open(store, conversation_id).replay(harness) == [result.output]
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial

from pydantic import JsonValue, ValidationError

from tether._canonical import canonical_json
from tether._gc import BULK, collector_paused
from tether._ids import new_ulid
from tether.errors import (
    ApprovalBlocked,
    ApprovalParked,
    ChildrenPending,
    Conflict,
    Fenced,
    HarnessMismatch,
    InheritedToolIntent,
    InputClosed,
    InputParked,
    JournalError,
    NoPendingExecution,
    Parked,
    ReplayDiverged,
    StoreUnavailable,
    TetherError,
)
from tether.journal._approvals import (
    ApprovalState,
    Decision,
    check_decidable,
    check_edit,
    find_decision,
    latest_gate,
)
from tether.journal._budget_gates import find_budget_decision
from tether.journal._check import PrefixEnd, ReplayCheck
from tether.journal._cut import fork_cut_outcome, loose_ends, open_streams, unanswered_calls
from tether.journal._effects import NO_HOOKS, NO_STAMP, JournalHooks, Stamp, ToolExecutor
from tether.journal._executions import Execution
from tether.journal._harness import Harness
from tether.journal._history import PrefixTranscripts, messages_of, projected
from tether.journal._inputs import check_answer, find_answer
from tether.journal._log import NOT_MINTED, Fence, JournalLog, logger
from tether.journal._recorded import Recorded
from tether.journal._turn import Mode, Turn, asked_by
from tether.journal._versions import VersionGuard, Versioning, tolerates_harness
from tether.journal._view import LogView
from tether.messages import Message, args_digest
from tether.models import Model
from tether.records import (
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    BudgetDecided,
    ExecutionEnded,
    ExecutionFailed,
    ExecutionStarted,
    InputAnswered,
    InputRequested,
    ModelCalled,
    Payload,
    Record,
    RecordDraft,
    Signal,
    SubmissionSettled,
    ToolCalled,
    ToolOutcome,
    UserMessage,
    VersionChanged,
)
from tether.store import (
    ClaimSettlement,
    Conversation,
    LogStore,
    SessionKey,
    StoreCapabilities,
    require_capability,
)

__all__ = ("Ending", "ExecutionResult", "Finisher", "Journal")

_DECISION_TRIES = 50
"""Decisions lost to a moving log before ``approve`` gives up (each loss means another
writer appended: the log does not stay busy for long while a gate waits)."""


@dataclass(frozen=True, slots=True)
class Ending:
    """What a :data:`Finisher` adds to an execution's end: ``records`` appended with it, and
    the claim it settles in that same commit (``Store.append_settled``), if any."""

    records: Sequence[RecordDraft] = ()
    settle: ClaimSettlement | None = None


Finisher = Callable[[JsonValue], Awaitable[Ending]]
"""Called with a finished execution's output; says what commits with its end."""


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """How ``exec`` or ``resume`` ended. ``resumed`` is false when there was nothing to resume."""

    execution_id: str | None
    output: JsonValue
    model_invocations: int = 0
    tool_invocations: int = 0
    resumed: bool = True


class Journal:
    """The effect journal of one conversation, written by one fenced writer."""

    def __init__(
        self,
        store: LogStore,
        conversation: Conversation,
        *,
        fence: Fence,
        head: int,
        model: Model | None = None,
        tools: ToolExecutor | None = None,
        view: LogView | None = None,
        stamp: Stamp = NO_STAMP,
        hooks: JournalHooks = NO_HOOKS,
        capabilities: StoreCapabilities | None = None,
    ) -> None:
        self.store = store
        self.conversation = conversation
        self.hooks = hooks
        self.model = model if model is None else hooks.model(model)
        self.tools = tools if tools is None else hooks.tools(tools)
        self.view = view if view is not None else LogView()
        self.log = JournalLog(
            store,
            conversation.id,
            fence=fence,
            head=head,
            view=self.view,
            stamp=stamp,
            hooks=hooks,
            capabilities=capabilities,
        )

    @classmethod
    async def open(
        cls,
        store: LogStore,
        conversation_id: str,
        *,
        fence: Fence | None = None,
        model: Model | None = None,
        tools: ToolExecutor | None = None,
        view: LogView | None = None,
        refresh: bool = False,
        lean: bool = False,
        stamp: Stamp = NO_STAMP,
        hooks: JournalHooks = NO_HOOKS,
        capabilities: StoreCapabilities | None = None,
    ) -> Journal:
        """Open a conversation's journal; without a ``fence`` it mints one (superseding others),
        with :data:`NOT_MINTED` it supersedes no one (it mints one only to write over another).

        Pass the ``view`` a previous journal of this conversation kept, to skip re-reading
        the log (it is brought up to date either way); ``refresh=True`` brings it up to date
        now, as :meth:`refresh` would. ``stamp`` names the claim every record is written
        under; ``hooks`` attach an observer, a steer source, effect wrappers and a redactor
        (see :class:`JournalHooks`). ``lean``: a view
        that has read nothing yet takes in only what the next execution needs (the log's
        snapshot and its tail, see :meth:`LogView.refresh`), so that the first turn on a long
        log read cold costs what its tail costs, not its length. ``capabilities``: what the
        store offers, as its runtime detected them (else found out when first needed).
        """
        refreshed = False
        if view is not None and lean and (view.head == 0 or refresh):
            # A new view finds out how long the log is as it reads it (ConversationNotFound
            # for an unknown id); a kept one, lean or whole, reads what follows its head.
            head = None if view.head == 0 else 0
            await view.refresh(store, conversation_id, lean=True, known_head=head)
            refreshed = True
        elif view is not None and (view.head == 0 or refresh):
            # A new view's first refresh reads the conversation from its first record (an
            # unknown id raises ConversationNotFound), so it costs no lookup of its own.
            await view.refresh(store, conversation_id)
            refreshed = True
        known = view.conversation if view is not None else None
        if known is not None and known.id == conversation_id:
            conversation = known  # immutable: the view keeps it for the next journal
        else:
            conversation = await store.get_conversation(conversation_id)
            if view is not None:
                view.conversation = conversation
        if fence is None:
            fence = await store.mint_fence(conversation_id)
        # Every path refreshes the view before it appends (the CAS point is the refreshed
        # head), so a kept view's head, even an empty view's 0, is as good a start as a fresh
        # read of the store's; only a journal without one reads the head for ``Journal.head``.
        head = view.head if view is not None else await store.head(conversation_id)
        journal = cls(
            store,
            conversation,
            fence=fence,
            head=head,
            model=model,
            tools=tools,
            view=view,
            stamp=stamp,
            hooks=hooks,
            capabilities=capabilities,
        )
        if refresh and not refreshed:
            await journal.refresh()
        return journal

    @classmethod
    async def open_session(
        cls,
        store: LogStore,
        key: SessionKey,
        *,
        conversation_id: str | None = None,
        model: Model | None = None,
        tools: ToolExecutor | None = None,
        hooks: JournalHooks = NO_HOOKS,
    ) -> Journal:
        """Open the journal of a session's conversation, creating the conversation (with
        ``conversation_id``, else a new id) if the session has none.

        The writer that creates a conversation holds no minted fence (:data:`NOT_MINTED`): no
        writer can precede the creation, and any later opener mints 1 and supersedes it.
        So a new session costs one commit. An existing one is opened as :meth:`open` does.

        Example::

            key = SessionKey("support", "acme", "ticket-42")
            journal = await Journal.open_session(store, key, model=model, tools=tools)
            result = await journal.exec(harness, [UserMessage(body="hi")])
        """
        conversation, created = await store.ensure_conversation(
            key, conversation_id=conversation_id or new_ulid(), created_at=datetime.now(UTC)
        )
        if not created:
            return await cls.open(store, conversation.id, model=model, tools=tools, hooks=hooks)
        return cls(
            store,
            conversation,
            fence=NOT_MINTED,
            head=1,  # a new conversation holds only its conversation_created record
            model=model,
            tools=tools,
            hooks=hooks,
        )

    @property
    def head(self) -> int:
        return self.log.head

    async def refresh(self, *, lean: bool = False) -> LogView:
        """Bring the view up to the log's head, which becomes this writer's CAS point.

        ``lean``: only what a new execution needs (see :meth:`LogView.refresh`); a later
        refresh that is not lean reads the rest."""
        await self.view.refresh(
            self.store, self.conversation.id, lean=lean, known_head=self.log.head
        )
        self.log.head = self.view.head
        return self.view

    async def records(self) -> list[Record]:
        """The whole log."""
        return list((await self.refresh()).records)

    # --- exec -------------------------------------------------------------------------

    async def exec(
        self,
        harness: Harness,
        inputs: Sequence[UserMessage | Signal],
        *,
        expected_seq: int | None = None,
        config: dict[str, JsonValue] | None = None,
        finish: Finisher | None = None,
        defer_start: bool = False,
        versioning: Versioning | None = None,
    ) -> ExecutionResult:
        """Start a new execution: journal its start and inputs (one CAS-guarded append at
        ``expected_seq``, the head by default), then run the harness live. A caller whose
        view already stands at ``expected_seq`` saves the read that brings it up to date: if
        the log moved on meanwhile, the append fails with ``Conflict`` either way.

        ``defer_start``: the start and inputs are held behind instead, and written with the
        execution's first durable write (a tool's intent, a delta flush, a slow model call's
        flush, or its end), saving a commit. Nothing that a crash could repeat is invoked on
        their account: a crash before that write leaves no trace of the execution, which is
        simply started again. For a caller that has just taken the conversation (the engine,
        under a claim's fresh fence): a writer superseded meanwhile would run its harness up
        to that write, a model call at most, before its first write fails.

        ``finish(output)`` may add records to append atomically with ``execution_ended``, and a
        claim to settle in that commit (the engine settles a submission with its execution's
        end).

        ``versioning``: the agent version this execution runs (its ``version`` and ``pins``
        are recorded on its start, for a later resume or replay to say what changed)."""
        current = expected_seq is not None and expected_seq == self.view.head
        view = self.view if current else await self.refresh(lean=True)
        if view.latest is not None:
            gate = latest_gate(view.latest, view.fork_seq)
            if gate is not None and gate.receipt is None and not gate.inherited:
                raise ApprovalBlocked(
                    f"conversation {self.conversation.id} waits on approval {gate.approval_id}"
                )
            if await self._close_abandoned(view, expected_seq):
                expected_seq = view.head
        execution_id = new_ulid()
        start = ExecutionStarted(
            harness=harness.name,
            harness_version=harness.version,
            input_count=len(inputs),
            config=config,
            version=None if versioning is None else versioning.version,
            pins=None if versioning is None else versioning.pins,
        )
        versions = VersionGuard(start, versioning)
        history = view.messages()  # before the append: the view takes in what we write
        if not defer_start:
            drafts = [self.log.draft(payload, execution_id) for payload in (start, *inputs)]
            appended = await self.log.append(
                drafts, expected_seq=self.log.head if expected_seq is None else expected_seq
            )
            turn = self._turn(
                Mode.LIVE,
                execution_id,
                Recorded(),
                history,
                messages_of(appended[1:]),
                config,
                versions=versions,
                identity=asked_by(inputs),
            )
            return await self._run(harness, turn, finish)
        if expected_seq is not None and expected_seq != view.head:
            # The log moved on: the start's append would fail, so invoke nothing first.
            raise Conflict(self.conversation.id, expected_seq, view.head)
        messages = projected(inputs)
        inputs_messages = [message for projection in messages.values() for message in projection]
        turn = self._turn(
            Mode.LIVE,
            execution_id,
            Recorded(),
            history,
            inputs_messages,
            config,
            versions=versions,
            identity=asked_by(inputs),
        )
        turn.hold_behind([start, *inputs], messages)  # like a model call's intent
        return await self._run(harness, turn, finish)

    # --- resume -----------------------------------------------------------------------

    async def pending(self) -> Execution | None:
        """The execution a crash left unfinished (the last one started), if any."""
        latest = (await self.refresh()).latest
        return latest if latest is not None and not latest.completed else None

    async def resume(
        self,
        harness: Harness,
        *,
        finish: Finisher | None = None,
        versioning: Versioning | None = None,
    ) -> ExecutionResult:
        """Finish the pending execution: serve its recorded prefix, then go live (I3, I4).

        Raises ``ApprovalParked`` (``InputParked``) without running anything while its gate
        is undecided (unanswered).

        ``versioning`` says which agent version resumes it and under which policy: ``strict``
        (as without it) raises ``ReplayDiverged`` when a recorded model call's input differs
        (I0) and ``HarnessMismatch`` for another harness; ``upgrade`` serves the recorded
        completion all the same and journals a ``version_changed`` record (once per
        execution) before any new effect. Either way a recorded call before a
        ``version_changed`` record of the execution may differ. An effect of another kind
        than the log holds, or recorded effects left unconsumed, always diverge.

        Example::

            await journal.resume(harness, versioning=Versioning("v2", pins, policy="upgrade"))
        """
        view = await self.refresh()
        pending = view.latest
        if pending is None or pending.completed:
            return ExecutionResult(None, None, resumed=False)
        pending.check_inputs()
        fork = view.fork_seq
        gate = latest_gate(pending, fork)
        if gate is not None and gate.receipt is None:
            if gate.inherited:
                raise InheritedToolIntent(
                    f"approval of call {gate.tool_call.call_id} belongs to the fork parent"
                )
            if gate.request is None or gate.decision is None:
                await self._park(pending, gate)
        self._refuse_inherited_intents(pending, fork)
        recorded = Recorded(pending.effects)
        upgrading = versioning is not None and versioning.policy == "upgrade"
        harness_changed = self._check_identity(
            pending, harness, tolerate=upgrading or tolerates_harness(recorded.changes)
        )
        await self._close_interrupted_stream(view.records, pending)
        started = pending.started
        versions = VersionGuard(
            started, versioning, recorded.changes, harness_changed=harness_changed
        )
        turn = self._turn(
            Mode.RESUME,
            pending.id,
            recorded,
            view.history_before(pending),
            messages_of(pending.inputs),
            started.config,
            versions=versions,
            identity=asked_by(record.payload for record in pending.inputs),
        )
        if harness_changed and not tolerates_harness(recorded.changes):
            turn.announce_version_change()  # its seq, if a model call differs, comes later
        return await self._run(harness, turn, finish)

    async def record_version_change(self, payload: VersionChanged) -> Record:
        """Append ``payload`` to the pending execution (an operator moving a parked run to
        another version: ``reason="operator"``), under this journal's fence; from then on a
        resume or replay may serve that execution's recorded model calls to code that asks
        differently. Raises ``NoPendingExecution`` when the last execution ended (or none
        started); retries while the log moves under it.

        Example::

            journal = await Journal.open(store, conversation_id)
            await journal.record_version_change(
                VersionChanged(from_version="v1", to_version="v2", reason="operator", actor="ann")
            )
        """
        for _ in range(_DECISION_TRIES):
            pending = await self.pending()
            if pending is None:
                raise NoPendingExecution(
                    f"conversation {self.conversation.id} has no pending execution"
                )
            draft = RecordDraft(
                payload, submission_id=pending.start.submission_id, execution_id=pending.id
            )
            try:
                [record] = await self.log.append([draft], expected_seq=self.view.head)
            except Conflict:
                continue  # the log moved (a decision, most likely): read it again
            return record
        raise StoreUnavailable("a version change: the log kept moving; try again")

    async def _park(self, pending: Execution, gate: ApprovalState) -> None:
        call = gate.tool_call
        if gate.kind == "input":
            if gate.request is None:
                return  # only the harness knows its question: the turn asks it again
            payload = gate.request.payload
            assert isinstance(payload, InputRequested)
            raise InputParked(payload.input_id, pending.id, call.call_id, gate.request.seq)
        if gate.request is None:  # the cut fell between the gated call and its request
            request_seq = self.log.head + 1
            approval_id = f"{self.conversation.id}.{request_seq}"
            request = ApprovalRequested(
                approval_id=approval_id,
                call_id=call.call_id,
                tool=call.tool,
                args=call.args,
                args_digest=args_digest(call.args),
            )
            await self.log.append([self.log.draft(request, pending.id)])
        else:
            payload = gate.request.payload
            assert isinstance(payload, ApprovalRequested)
            approval_id, request_seq = payload.approval_id, gate.request.seq
        raise ApprovalParked(approval_id, pending.id, call.call_id, request_seq)

    @staticmethod
    def _refuse_inherited_intents(pending: Execution, fork: int) -> None:
        answered = {
            record.payload.call_id
            for record in pending.effects
            if isinstance(record.payload, ToolOutcome | AssistantMessageCompleted)
        }
        for record in pending.effects:
            payload = record.payload
            if record.seq <= fork and isinstance(payload, ToolCalled | ModelCalled):
                if payload.call_id not in answered:
                    raise InheritedToolIntent(
                        f"seq {record.seq}: call {payload.call_id} was left unresolved in the fork "
                        "parent; exec a new turn in this fork instead"
                    )

    @staticmethod
    def _check_identity(execution: Execution, harness: Harness, *, tolerate: bool) -> bool:
        """Whether another harness than the one the execution recorded serves it; raises
        ``HarnessMismatch`` unless ``tolerate`` (a version change may bring another)."""
        started = execution.started
        recorded = (started.harness, started.harness_version)
        if recorded == (harness.name, harness.version):
            return False
        if not tolerate:
            raise HarnessMismatch(recorded, (harness.name, harness.version))
        return True

    async def _close_interrupted_stream(
        self, records: Sequence[Record], pending: Execution
    ) -> None:
        """A crash mid-stream leaves a started message with deltas and no completion; close it
        with an interrupted completion (not an effect) before the call is re-driven."""
        for closing in open_streams(records, pending):
            await self.log.append([self.log.draft(closing, pending.id)])

    async def repair_cut(self) -> list[Record]:
        """Close what a fork's cut left open in the parent's execution it copied, as recovery
        would, so that the child's next execution starts from a whole history: a message cut
        mid-stream gets an interrupted completion, and each tool call cut from its result
        gets an ``unknown`` result saying so. Nothing is written if the cut is clean (or this
        is no fork). Returns the records written.

        They belong to no execution: the copied one stays the parent's, which the child may
        not resume (``InheritedToolIntent``); it execs a new turn instead.

        Example::

            child = await store.fork(parent_id, at_seq=12, key=key, ...)
            repaired = await (await Journal.open(store, child.id, fence=NOT_MINTED)).repair_cut()
        """
        view = await self.refresh()
        pending = view.latest
        if pending is None or pending.completed or not 0 < pending.start.seq < view.fork_seq:
            return []
        closing = self._closing(view, pending)
        if not closing:
            return []
        # Only now that there is something to write, as for a decision: a clean fork costs
        # no commit, and a writer already at work in the child is superseded only for this.
        self.log.fence = await self.store.mint_fence(self.conversation.id)
        drafts = [self.log.draft(payload, None) for payload in closing]
        return await self.log.append(drafts, expected_seq=view.head)

    async def _close_abandoned(self, view: LogView, expected_seq: int | None) -> bool:
        """Before a new execution starts, close what the one before it left open, if it never
        ended: a fork's cut the fork did not repair, or a run that ended without closing its
        execution (a log an older Tether wrote when a run was aborted mid-tool). Its tool calls
        would otherwise reach the model without results, which every provider refuses. The
        records belong to no execution, as a fork's repair does. Returns whether it wrote."""
        pending = view.latest
        if pending is None or pending.completed:
            return False
        closing = self._closing(view, pending)
        if not closing:
            return False
        drafts = [self.log.draft(payload, None) for payload in closing]
        at = view.head if expected_seq is None else expected_seq
        await self.log.append(drafts, expected_seq=at)
        return True

    @staticmethod
    def _closing(view: LogView, pending: Execution) -> list[Payload]:
        if 0 < pending.start.seq < view.fork_seq:  # the fork parent's: it may have gone on there
            return [
                *open_streams(view.records, pending),
                *map(fork_cut_outcome, unanswered_calls(view.records, pending)),
            ]
        return loose_ends(view.records, pending, _how_it_ended(view, pending))

    # --- replay -----------------------------------------------------------------------

    async def replay(
        self, harness: Harness, *, versioning: Versioning | None = None
    ) -> list[JsonValue]:
        """Re-run every completed execution from the log alone: no model call, no tool call,
        no append (I1). Returns their outputs; raises ``ReplayDiverged`` on any difference,
        except a recorded model call before a ``version_changed`` record of its execution,
        whose input may differ. ``versioning`` names the version replaying (its policy is
        not applied: a replay writes nothing), for ``ReplayDiverged`` to say what differs."""
        # Serving effects never waits, so a replay is one bounded stretch of reading and
        # decoding, like a page read: the collector would rescan the heap as the log grows.
        with collector_paused(BULK):
            view = await self.refresh()
            completed = [e for e in view.executions.by_id.values() if e.completed]
            for execution in completed:  # preflight everything before the first run
                execution.check_inputs()
                changes = [r for r in execution.effects if r.kind == VersionChanged.KIND]
                self._check_identity(execution, harness, tolerate=tolerates_harness(changes))
            if versioning is not None and versioning.policy != "strict":
                versioning = replace(versioning, policy="strict")
            return await self._replay(view, completed, harness, versioning)

    async def _replay(
        self,
        view: LogView,
        completed: list[Execution],
        harness: Harness,
        versioning: Versioning | None,
    ) -> list[JsonValue]:
        transcripts = PrefixTranscripts(view.records)
        outputs: list[JsonValue] = []
        for execution in completed:
            outputs.append(await self._replay_one(transcripts, execution, harness, versioning))
        return outputs

    async def _replay_one(
        self,
        transcripts: PrefixTranscripts,
        execution: Execution,
        harness: Harness,
        versioning: Versioning | None,
        *,
        harness_changed: bool = False,
    ) -> JsonValue:
        """Replay one execution from the log alone; its output. A completed one must make
        every recorded effect and end as it did (else ``ReplayDiverged``); a pending one is
        replayed over its recorded prefix, and stops with ``PrefixEnd`` where a resume would
        go live (or ends, having made every recorded effect: its output is then ``None``)."""
        recorded = Recorded(execution.effects)
        versions = VersionGuard(
            execution.started, versioning, recorded.changes, harness_changed=harness_changed
        )
        turn = self._turn(
            Mode.REPLAY,
            execution.id,
            recorded,
            partial(transcripts.before, execution.start_index),
            messages_of(execution.inputs),
            execution.started.config,
            replay=True,
            versions=versions,
            prefix=not execution.completed,
            identity=asked_by(record.payload for record in execution.inputs),
        )
        try:
            output = await harness.run(turn)
        except Exception:
            turn.close()
            if turn.failure is not None:
                raise turn.failure from None
            raise
        turn.close()
        if isinstance(turn.failure, PrefixEnd):
            raise turn.failure  # the harness swallowed it: the prefix was served all the same
        turn.check_consumed()
        end = execution.end
        if end is None:
            return None  # a pending execution the code ends here: a resume would end it
        if canonical_json(output) != canonical_json(execution.output):
            raise ReplayDiverged(
                f"execution {execution.id}: output mismatch",
                execution_id=execution.id,
                seq=end.seq,
                expected={"kind": end.kind, "payload": end.fields.get("payload")},
                got={"kind": end.kind, "payload": {"output": output}},
                from_version=versions.from_version,
                to_version=versions.to_version,
                differs=versions.differs,
            )
        return output

    # --- the deploy gate --------------------------------------------------------------

    async def check(self, harness: Harness, *, versioning: Versioning | None = None) -> ReplayCheck:
        """Whether ``harness`` (a new version's code) makes the effects this log recorded:
        every completed execution is replayed as :meth:`replay` does, then the pending one (a
        run would resume it: parked on an approval, an input or children, or cut by a crash)
        over its recorded prefix, where reaching the end of the recorded effects (the code
        asks for one the log does not hold) counts as compatible. Stops at the first
        divergence and returns it (:class:`ReplayCheck`); it never raises one.

        No model call, no tool call, no append: open the journal with ``fence=NOT_MINTED``,
        so that no writer is superseded either. ``versioning`` names the version checked
        (its policy is not applied: the check is strict, so a model input that differs is a
        divergence), for the divergence to say what differs. Another harness than a record
        names is checked all the same (a deploy may bring one): its differences say
        ``harness``.

        Example::

            journal = await Journal.open(store, conversation_id, fence=NOT_MINTED)
            check = await journal.check(spec.harness, versioning=Versioning("v2", pins))
            if not check.compatible:
                print(check.diverged.seq, check.diverged.differs)
        """
        with collector_paused(BULK):  # as for a replay: one bounded stretch of decoding
            view = await self.refresh()
            executions = [e for e in view.executions.by_id.values() if e.completed]
            pending = self._resumable(view)
            if pending is not None:
                executions.append(pending)
            if versioning is not None and versioning.policy != "strict":
                versioning = replace(versioning, policy="strict")
            transcripts = PrefixTranscripts(view.records)
            for checked, execution in enumerate(executions, start=1):
                execution.check_inputs()
                changes = [r for r in execution.effects if r.kind == VersionChanged.KIND]
                changed = self._check_identity(execution, harness, tolerate=True)
                try:
                    await self._replay_one(
                        transcripts,
                        execution,
                        harness,
                        versioning,
                        harness_changed=changed and not tolerates_harness(changes),
                    )
                except PrefixEnd:
                    pass  # the pending execution's recorded effects were all made again
                except ReplayDiverged as diverged:
                    return ReplayCheck(checked, pending is not None, diverged)
            return ReplayCheck(len(executions), pending is not None)

    @staticmethod
    def _resumable(view: LogView) -> Execution | None:
        """The execution a run would resume: the last one, if it never ended, is not a fork
        parent's (a fork starts a new one instead), and its submission was not settled (an
        abandoned one is closed by the next execution, never resumed)."""
        latest = view.latest
        if latest is None or latest.completed or 0 < latest.start.seq < view.fork_seq:
            return None
        submission_id = latest.start.submission_id
        if submission_id is not None:
            for record in view.records[latest.start_index :]:
                if record.kind == SubmissionSettled.KIND and record.submission_id == submission_id:
                    return None
        return latest

    # --- running a turn ---------------------------------------------------------------

    def _turn(
        self,
        mode: Mode,
        execution_id: str,
        recorded: Recorded,
        history: list[Message] | Callable[[], list[Message]],
        inputs: list[Message],
        config: dict[str, JsonValue] | None,
        *,
        replay: bool = False,
        versions: VersionGuard | None = None,
        prefix: bool = False,
        identity: Actor | None = None,
    ) -> Turn:
        return Turn(
            log=self.log,
            execution_id=execution_id,
            session=self.conversation.key.session,
            mode=mode,
            recorded=recorded,
            history=history,
            inputs=inputs,
            config=dict(config) if config is not None else None,
            model=None if replay else self.model,
            tools=None if replay else self.tools,
            hooks=self.hooks.replaying() if replay else self.hooks,
            versions=versions,
            prefix=prefix,
            identity=identity,
        )

    async def _run(
        self, harness: Harness, turn: Turn, finish: Finisher | None = None
    ) -> ExecutionResult:
        try:
            output = await harness.run(turn)
        except BaseException as exc:
            turn.close()
            if isinstance(turn.failure, Parked):
                raise turn.failure from None  # parked: no end and no failure record
            await self._record_failure(turn, exc)
            if turn.failure is not None and not isinstance(exc, TetherError):
                raise turn.failure from exc
            raise
        if turn.failure is None:
            with contextlib.suppress(ChildrenPending):
                turn.wait_for_children()  # a harness that ended with a child still running
        turn.close()
        if isinstance(turn.failure, Parked):
            raise turn.failure  # the harness swallowed the park; the execution is still parked
        try:
            if turn.failure is not None:
                raise turn.failure
            if turn.mode is Mode.RESUME:
                turn.check_consumed()
            ended = ExecutionEnded(output=output)
        except (JournalError, ValidationError) as exc:
            await self._record_failure(turn, exc)
            if isinstance(exc, ValidationError):
                raise JournalError(
                    f"the harness returned a value that is not JSON: {exc}"
                ) from None
            raise
        ending = await finish(ended.output) if finish is not None else Ending()
        # What the turn holds behind (its last completion) commits with its end.
        batch = [*turn.take_behind(), self.log.draft(ended, turn.execution_id), *ending.records]
        turn.keep_messages(batch, await self.log.append(batch, settle=ending.settle))
        await self.view.save_snapshot(self.store, self.conversation.id)
        return ExecutionResult(
            turn.execution_id, ended.output, turn.model_invocations, turn.tool_invocations
        )

    async def _record_failure(self, turn: Turn, exc: BaseException) -> None:
        """``execution_failed`` is audit only: the execution stays pending and can be resumed."""
        failed = ExecutionFailed(
            error=self.log.redact(f"{type(exc).__name__}: {exc}"),
            error_code=exc.code if isinstance(exc, TetherError) else None,
        )
        try:
            await self.log.append([*turn.take_behind(), self.log.draft(failed, turn.execution_id)])
        except TetherError:
            logger.warning("could not record the failure of execution %s", turn.execution_id)

    # --- approvals --------------------------------------------------------------------

    async def inspect_approval(self) -> ApprovalState | None:
        """The state of the latest execution's last gated tool call, if any."""
        view = await self.refresh()
        return latest_gate(view.latest, view.fork_seq) if view.latest is not None else None

    async def approve(
        self,
        approval_id: str,
        decision: Decision,
        *,
        approver: str,
        reason: str | None = None,
        args: dict[str, JsonValue] | None = None,
        by: Actor | None = None,
    ) -> Record:
        """Record a decision on a parked tool call, superseding every earlier writer, and
        requeue the submission waiting for it, in one commit (``GateStore.append_decision``).

        Idempotent: the same decision again returns the original record (nothing written);
        a different one raises ``ApprovalConflict``, also when it loses a race with the
        first. ``edit`` runs the tool with ``args``, which must fit the tool's parameters
        schema as the request recorded it (``InvalidEditArgs``).
        """

        def decided(view: LogView) -> Record | tuple[Record, Payload]:
            request, existing = find_decision(
                view.records,
                approval_id,
                decision=decision,
                approver=approver,
                reason=reason,
                args=args,
                by=by,
            )
            if existing is not None:
                return existing
            requested = request.payload
            assert isinstance(requested, ApprovalRequested)
            check_decidable(request, view.latest, view.fork_seq, approval_id)
            if args is not None:
                check_edit(requested, args)
            return request, ApprovalDecided(
                approval_id=approval_id,
                call_id=requested.call_id,
                decision=decision,
                args=args,
                reason=reason,
                approver=approver,
                by=by,
            )

        return await self._decide(f"approval {approval_id}", decided)

    async def _decide(
        self, what: str, decide: Callable[[LogView], Record | tuple[Record, Payload]]
    ) -> Record:
        """Write a person's decision on a gate (``decide`` finds the request in a fresh view
        and gives the record to write, or the identical one already written), waking its
        submission in the same commit; read again and retry while the log moves."""
        for _ in range(_DECISION_TRIES):
            view = await self.refresh()
            decided = decide(view)
            if isinstance(decided, Record):
                return decided
            request, payload = decided
            draft = RecordDraft(
                payload, submission_id=request.submission_id, execution_id=request.execution_id
            )
            try:
                [record] = await self._append_decision(draft, view.head, request.submission_id)
            except (Conflict, Fenced):
                continue  # the log moved (a concurrent decision, most likely): read it again
            return record
        raise StoreUnavailable(f"{what}: the log kept moving; try again")

    async def _append_decision(
        self, draft: RecordDraft, expected_seq: int, wake: str | None
    ) -> list[Record]:
        if (gates := self.log.capabilities.gates) is not None:
            records = await gates.append_decision(
                self.conversation.id, [draft], expected_seq=expected_seq, wake=wake
            )
        else:  # a store without gates keeps no parked run to wake, nor appends without a fence
            self.log.fence = await self.store.mint_fence(self.conversation.id)
            records = await self.store.append(
                self.conversation.id, [draft], expected_seq=expected_seq, fence=self.log.store_fence
            )
        self.log.head = records[-1].seq
        self.view.extend(records)
        return records

    async def answer(
        self, input_id: str, value: JsonValue, *, responder: str, by: Actor | None = None
    ) -> Record:
        """Record the answer to a parked question and requeue the submission waiting for
        it, in one commit (``GateStore.append_decision``), as :meth:`approve` does a decision.

        Idempotent: the same answer again returns the original record (nothing written); a
        different one raises ``InputConflict``. An answer that does not fit the request's
        schema raises ``InvalidAnswer``; one the log can no longer take (its submission
        settled, a fork parent's) ``InputClosed``.
        """

        def answered(view: LogView) -> Record | tuple[Record, Payload]:
            request, existing = find_answer(
                view.records, input_id, value=value, responder=responder, by=by
            )
            if existing is not None:
                return existing
            requested = request.payload
            assert isinstance(requested, InputRequested)
            check_decidable(request, view.latest, view.fork_seq, input_id, refuse=InputClosed)
            check_answer(requested, value)
            return request, InputAnswered(
                input_id=input_id,
                call_id=requested.call_id,
                value=value,
                responder=responder,
                by=by,
            )

        return await self._decide(f"input {input_id}", answered)

    async def decide_budget(self, gate_id: str, decision: BudgetDecided) -> Record:
        """Record a person's decision on a ``budget`` gate (an extension, or a rejection)
        and requeue the submission waiting on it, in one commit, as :meth:`approve` does.

        Idempotent: the same decision again returns the original record; a different one
        raises ``ApprovalConflict``; ``ApprovalNotFound`` for an unknown gate id;
        ``InvalidApproval`` once its submission settled."""

        def decided(view: LogView) -> Record | tuple[Record, Payload]:
            request, existing = find_budget_decision(
                view.records, gate_id, decision, by=decision.by
            )
            if existing is not None:
                return existing
            return request, decision

        return await self._decide(f"budget gate {gate_id}", decided)

    # --- fork and verify --------------------------------------------------------------

    async def fork(
        self, at_seq: int, key: SessionKey, *, new_conversation_id: str | None = None
    ) -> Conversation:
        """A new conversation for ``key`` whose first ``at_seq`` records are this one's."""
        forks = require_capability(self.log.capabilities.forks, "forks")
        return await forks.fork(
            self.conversation.id,
            at_seq=at_seq,
            key=key,
            new_conversation_id=new_conversation_id or new_ulid(),
            created_at=datetime.now(UTC),
        )

    async def verify(self) -> int:
        """Re-derive the whole hash chain; the number of records (``LogTampered`` if broken)."""
        return await self.store.verify(self.conversation.id)


def _how_it_ended(view: LogView, pending: Execution) -> str:
    """What the settlement of an unfinished execution's submission said, for the results
    that close it; the log may not hold one (a library's own use of a journal)."""
    submission_id = pending.start.submission_id
    for record in view.records[pending.start_index :]:
        payload = record.payload
        if isinstance(payload, SubmissionSettled) and record.submission_id == submission_id:
            return payload.error or payload.status.value
    return "its run ended before it did"
