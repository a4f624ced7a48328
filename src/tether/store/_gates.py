"""Gates: an index of the waits for a human in every log, and what became of them.

A gate is one ``approval_requested`` record (kind ``approval``: a human approves, rejects or
edits a tool call) or one ``input_requested`` record (kind ``input``: a human gives a value).
A store keeps its gates beside the records, written in the commit of the record that
changes them, so the index never disagrees with the log it is derived from (the log stays
the only truth):

- ``approval_requested`` opens an approval gate, ``input_requested`` an input gate (with its
  prompt and answer schema), ``pending``;
- ``approval_decided`` decides the pending approval gate of its conversation with that
  approval id (``decided``, with the decision, the edited arguments, the reason, the
  approver, who decided as the server verified them (the record's ``by``) and the
  decision's time); ``input_answered`` decides the pending input gate with that input id
  (decision ``answer``, the value as ``answer``, the responder as ``approver``, its ``by``);
  a decided gate stays decided, whatever follows, and a decision of one kind never decides
  a gate of the other;
- a ``denied`` ``tool_outcome`` of a pending gate's call (same conversation, execution and
  call id) closes it undecided (``closed``), whatever its kind: the host writes one when a
  submission settles with its gate open (aborted, timed out, out of attempts).

A fork's copied records are not indexed for the child: a gate it inherits belongs to the
parent (its approval id names the parent's conversation, and only the parent may decide
it), so it is listed once, under the parent.

Gates are listed in the order of their requests: the request record's ``time``, then the
conversation id, then the record's seq (a total order, the same on every backend; the
cursor of a gate names its place in it, and ``after`` lists the gates past that place).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

import orjson
from pydantic import JsonValue

from tether._canonical import canonical_json
from tether._states import GateStatus
from tether._wire import JsonObject
from tether.errors import InvalidCursor, RecordDecodeError
from tether.messages import ToolOutcomeStatus, args_digest
from tether.records import (
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    BudgetDecided,
    BudgetRequested,
    InputAnswered,
    InputRequested,
    Record,
    SubmissionSettled,
    ToolOutcome,
)
from tether.store._common import check_limit, from_micros, record_time, to_micros
from tether.store._types import MAX_SEQ, Conversation, SessionKey

__all__ = (
    "DENIED_MARK",
    "GATE_RECORDS",
    "Gate",
    "GateChange",
    "GateClosed",
    "GateDecided",
    "GateDecision",
    "GateIndex",
    "GateKind",
    "GateRequested",
    "GateSettled",
    "GateStatus",
    "OrderKey",
    "decode_cursor",
    "encode_cursor",
    "gate_changes",
    "has_gate_changes",
    "index_pages",
    "merge_pages",
    "parse_time",
)

_MICROS = re.compile(r"-?[0-9]{1,19}")  # ASCII digits only: int() takes "¹", " 1" and "1_0"
_SEQ = re.compile(r"[0-9]{1,19}")

GATE_RECORDS = frozenset(
    {
        ApprovalRequested.KIND,
        ApprovalDecided.KIND,
        InputRequested.KIND,
        InputAnswered.KIND,
        ToolOutcome.KIND,
        BudgetRequested.KIND,
        BudgetDecided.KIND,
        SubmissionSettled.KIND,
    }
)
"""The record kinds that may change a gate (a ``tool_outcome`` only when denied; a
``submission_settled`` closes its submission's pending budget gates)."""
DENIED_MARK = b'"status":"denied"'
"""In a record's canonical bytes only a denied outcome's payload holds this sequence (a quote
inside a string is escaped): what a backfill reads of the tool outcomes, before decoding."""


class GateKind(StrEnum):
    """What a gate waits for: ``approval`` (a human approves, rejects or edits a tool call:
    ``approval_requested``) or ``input`` (a human gives the value a call returns:
    ``input_requested``, ``Turn.ask``).

    Example::

        inputs = await store.list_gates(kind=GateKind.INPUT, status=GateStatus.PENDING)
    """

    APPROVAL = "approval"
    INPUT = "input"
    BUDGET = "budget"
    """A run whose budget ran out waits for a person to extend it (``budget_requested``;
    docs/budgets.md): ``tool`` is ``budget``, ``args`` what was spent against which limit."""


GateDecision = Literal["approve", "reject", "edit", "answer"]
"""What decided a gate: an approval's decision, or ``answer`` (an input gate's)."""


OrderKey = tuple[datetime, str, int]
"""Where a gate sorts: its request's time, its conversation id, its request's seq."""


@dataclass(frozen=True, slots=True)
class Gate:
    """One approval or input request and what became of it, as ``GateStore.list_gates`` lists it.

    An input gate (``kind`` ``input``) keeps its ``prompt`` and ``answer_schema``; once
    answered it is ``decided`` with decision ``answer``, the value as ``answer``, the
    responder as ``approver`` and the answer's time as ``decided_at``.

    Example::

        page = await store.list_gates(status=GateStatus.DECIDED, agent="support", limit=50)
        for gate in page:
            print(gate.approval_id, gate.tool, gate.decision, gate.approver, gate.decided_at)
            if gate.decided_by is not None:  # a signed-in person decided it
                print("  verified:", gate.decided_by.subject, gate.decided_by.tenant)
        more = await store.list_gates(status=GateStatus.DECIDED, agent="support",
                                      after=page[-1].cursor) if len(page) == 50 else []
        asked = await store.list_gates(kind=GateKind.INPUT, status=GateStatus.PENDING)
    """

    approval_id: str
    """The id of the request: an approval id, or an input gate's input id (same shape)."""
    conversation_id: str
    seq: int
    """The seq of the ``approval_requested`` (or ``input_requested``) record."""
    key: SessionKey
    submission_id: str | None
    execution_id: str | None
    call_id: str
    tool: str
    args: Mapping[str, Any]
    args_digest: str
    requested_at: datetime
    status: GateStatus
    decision: GateDecision | None = None
    edited_args: Mapping[str, Any] | None = None
    """The arguments an ``edit`` decision runs the tool with."""
    reason: str | None = None
    """The decision's reason."""
    approver: str | None = None
    """Who decided: the approver, or an input's responder."""
    decided_at: datetime | None = None
    closed_at: datetime | None = None
    kind: GateKind = GateKind.APPROVAL
    prompt: str | None = None
    """An input gate's question, as a person reads it."""
    answer_schema: Mapping[str, Any] | None = None
    """The JSON Schema an input gate's answer must fit (``None``: any JSON value)."""
    answer: Any = None
    """An answered input gate's value (any JSON value, ``None`` included: see ``status``)."""
    tenant: str | None = None
    """Its conversation's tenant (``Conversation.tenant``)."""
    metadata: Mapping[str, Any] | None = None
    """What the framework attached to the request (pydantic-ai's ``ApprovalRequired`` or
    ``CallDeferred`` metadata: the record's ``metadata``), ``None`` when nothing was."""
    decided_by: Actor | None = None
    """Who decided (or answered), as the server verified them: the decision's ``by``.
    ``None`` when no one authenticated made it (a library call, a server without auth), and
    for every gate decided before decisions recorded one; ``approver`` is only the name
    shown."""

    @property
    def order_key(self) -> OrderKey:
        return (self.requested_at, self.conversation_id, self.seq)

    @property
    def cursor(self) -> str:
        """An opaque string naming this gate's place in the listing order: pass it as
        ``after`` for the gates that follow."""
        return encode_cursor(self.order_key)


# --- cursors --------------------------------------------------------------------------


def encode_cursor(key: OrderKey) -> str:
    moment, conversation_id, seq = key
    text = f"{to_micros(moment)}:{seq}:{conversation_id}"
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str) -> OrderKey:
    """The order key a cursor names; ``InvalidCursor`` for anything ``encode_cursor`` did
    not write (checked before any store is asked: no backend sees a value it cannot hold)."""
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        micros, seq, conversation_id = raw.decode("utf-8").split(":", 2)
        if not (_MICROS.fullmatch(micros) and _SEQ.fullmatch(seq)):
            raise ValueError("not ASCII digits")
        moment, number = from_micros(int(micros)), int(seq)
    except (binascii.Error, UnicodeDecodeError, ValueError, OverflowError):
        raise InvalidCursor("not a cursor a listing handed out") from None
    if not 0 < number <= MAX_SEQ or not conversation_id or "\x00" in conversation_id:
        raise InvalidCursor("not a cursor a listing handed out")
    if not datetime(1, 1, 2, tzinfo=UTC) <= moment <= datetime(9999, 12, 30, tzinfo=UTC):
        raise InvalidCursor("not a cursor a listing handed out")
    return moment, conversation_id, number


def merge_pages(pages: Iterable[Sequence[Gate]], limit: int) -> list[Gate]:
    """The first ``limit`` gates of several pages (each in listing order): a listing of
    every status (or of both kinds) reads each one's page from its own index range and
    merges them."""
    return sorted((gate for page in pages for gate in page), key=lambda g: g.order_key)[:limit]


def index_pages(
    status: GateStatus | None, kind: GateKind | None
) -> list[tuple[GateStatus, GateKind]]:
    """The (status, kind) pages a listing reads, each one range of an index led by both: a
    filter left out reads a page for each of its values."""
    return [
        (one, sort)
        for one in (GateStatus if status is None else (status,))
        for sort in (GateKind if kind is None else (kind,))
    ]


# --- deriving gates from records ------------------------------------------------------


def parse_time(text: str) -> datetime:
    """A record's ``time`` (RFC 3339, UTC, ``Z``) as an aware datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


@dataclass(frozen=True, slots=True)
class GateRequested:
    """A new pending gate at ``seq`` of the record's conversation."""

    seq: int
    approval_id: str
    submission_id: str | None
    execution_id: str | None
    call_id: str
    tool: str
    args: bytes
    """Canonical JSON."""
    args_digest: str
    at: datetime
    kind: GateKind = GateKind.APPROVAL
    prompt: str | None = None
    answer_schema: bytes | None = None
    """Canonical JSON, or ``None``."""
    metadata: bytes | None = None
    """Canonical JSON of what the framework attached to the request, or ``None``."""


@dataclass(frozen=True, slots=True)
class GateDecided:
    """Decides the conversation's pending gates of ``kind`` with ``approval_id``."""

    approval_id: str
    decision: GateDecision
    args: bytes | None
    reason: str | None
    approver: str
    at: datetime
    kind: GateKind = GateKind.APPROVAL
    answer: bytes | None = None
    """An input's value, canonical JSON (``b"null"`` for a null answer)."""
    by: Actor | None = None
    """Who decided, as the server verified them (the record's ``by``)."""


@dataclass(frozen=True, slots=True)
class GateClosed:
    """Closes the conversation's pending gates of this execution's call."""

    execution_id: str | None
    call_id: str
    at: datetime


@dataclass(frozen=True, slots=True)
class GateSettled:
    """Closes the conversation's pending budget gates of this submission (it settled: a
    budget gate has no tool call whose denied outcome could close it)."""

    submission_id: str
    at: datetime


GateChange = GateRequested | GateDecided | GateClosed | GateSettled


def _metadata(metadata: JsonObject | None) -> bytes | None:
    return None if metadata is None else canonical_json(metadata)


def _is_denied(record: Record) -> bool:
    payload = record.payload
    return isinstance(payload, ToolOutcome) and payload.status == ToolOutcomeStatus.DENIED


def has_gate_changes(records: Iterable[Record]) -> bool:
    """Whether any of ``records`` changes a gate: an append without one costs a set lookup
    a record (a sealed record's payload is at hand, so a tool outcome decodes nothing)."""
    for record in records:
        if record.kind in GATE_RECORDS and (record.kind != ToolOutcome.KIND or _is_denied(record)):
            return True
    return False


def gate_changes(records: Iterable[Record]) -> list[GateChange]:
    """What ``records`` (of one conversation, in seq order) do to its gates, in order.

    A record whose stored payload does not decode changes nothing (verification reports
    it); every store applies these changes, in this order, in the commit of the records.
    """
    changes: list[GateChange] = []
    for record in records:
        if record.kind not in GATE_RECORDS:
            continue
        try:
            payload = record.payload
        except RecordDecodeError:
            continue
        at = parse_time(record_time(record.canonical))
        if isinstance(payload, ApprovalRequested):
            changes.append(
                GateRequested(
                    seq=record.seq,
                    approval_id=payload.approval_id,
                    submission_id=record.submission_id,
                    execution_id=record.execution_id,
                    call_id=payload.call_id,
                    tool=payload.tool,
                    args=canonical_json(payload.args),
                    args_digest=payload.args_digest,
                    at=at,
                    metadata=_metadata(payload.metadata),
                )
            )
        elif isinstance(payload, ApprovalDecided):
            changes.append(
                GateDecided(
                    approval_id=payload.approval_id,
                    decision=payload.decision,
                    args=None if payload.args is None else canonical_json(payload.args),
                    reason=payload.reason,
                    approver=payload.approver,
                    at=at,
                    by=payload.by,
                )
            )
        elif isinstance(payload, InputRequested):
            changes.append(
                GateRequested(
                    seq=record.seq,
                    approval_id=payload.input_id,
                    submission_id=record.submission_id,
                    execution_id=record.execution_id,
                    call_id=payload.call_id,
                    tool=payload.tool,
                    args=canonical_json(payload.args),
                    args_digest=args_digest(payload.args),  # as an approval's is computed
                    at=at,
                    kind=GateKind.INPUT,
                    prompt=payload.prompt,
                    answer_schema=None
                    if payload.answer_schema is None
                    else canonical_json(payload.answer_schema),
                    metadata=_metadata(payload.metadata),
                )
            )
        elif isinstance(payload, InputAnswered):
            changes.append(
                GateDecided(
                    approval_id=payload.input_id,
                    decision="answer",
                    args=None,
                    reason=None,
                    approver=payload.responder,
                    at=at,
                    kind=GateKind.INPUT,
                    answer=canonical_json(payload.value),
                    by=payload.by,
                )
            )
        elif isinstance(payload, ToolOutcome) and payload.status == ToolOutcomeStatus.DENIED:
            changes.append(GateClosed(record.execution_id, payload.call_id, at))
        elif isinstance(payload, BudgetRequested):
            args: dict[str, JsonValue] = {
                "limit": payload.limit,
                "used": payload.used,
                "max": payload.max,
                "spent": payload.spent,
                "budget": payload.budget,
                "scope": payload.scope or "submission",
            }
            changes.append(
                GateRequested(
                    seq=record.seq,
                    approval_id=payload.gate_id,
                    submission_id=record.submission_id,
                    execution_id=record.execution_id,
                    call_id=payload.gate_id,
                    tool=GateKind.BUDGET.value,
                    args=canonical_json(args),
                    args_digest=args_digest(args),
                    at=at,
                    kind=GateKind.BUDGET,
                )
            )
        elif isinstance(payload, BudgetDecided):
            changes.append(
                GateDecided(
                    approval_id=payload.gate_id,
                    decision=payload.decision,
                    args=None if payload.extension is None else canonical_json(payload.extension),
                    reason=payload.reason,
                    approver=payload.approver,
                    at=at,
                    kind=GateKind.BUDGET,
                    by=payload.by,
                )
            )
        elif isinstance(payload, SubmissionSettled) and record.submission_id is not None:
            changes.append(GateSettled(record.submission_id, at))
    return changes


# --- the reference index --------------------------------------------------------------


@dataclass
class _Stored:
    gate: Gate  # the JSON fields are placeholders; the bytes below are the truth
    args: bytes
    answer_schema: bytes | None = None
    edited_args: bytes | None = None
    answer: bytes | None = None
    metadata: bytes | None = None


@dataclass
class GateIndex:
    """The gates of a store held in memory, kept obviously correct (the memory store's,
    and the model every other backend is checked against)."""

    _gates: dict[tuple[str, int], _Stored] = field(default_factory=dict)

    def forget(self, conversation_id: str) -> None:
        """Drop the gates of an erased conversation."""
        self._gates = {k: v for k, v in self._gates.items() if k[0] != conversation_id}

    def index(self, conversation: Conversation, records: Sequence[Record]) -> None:
        """Apply what ``records``, just appended to ``conversation``, do to its gates."""
        for change in gate_changes(records):
            if isinstance(change, GateRequested):
                gate = Gate(
                    approval_id=change.approval_id,
                    conversation_id=conversation.id,
                    seq=change.seq,
                    key=conversation.key,
                    submission_id=change.submission_id,
                    execution_id=change.execution_id,
                    call_id=change.call_id,
                    tool=change.tool,
                    args={},
                    args_digest=change.args_digest,
                    requested_at=change.at,
                    status=GateStatus.PENDING,
                    kind=change.kind,
                    prompt=change.prompt,
                    tenant=conversation.tenant,
                )
                self._gates[(conversation.id, change.seq)] = _Stored(
                    gate, change.args, change.answer_schema, metadata=change.metadata
                )
                continue
            for stored in self._gates.values():
                gate = stored.gate
                if gate.conversation_id != conversation.id or gate.status is not GateStatus.PENDING:
                    continue
                if isinstance(change, GateDecided) and (gate.approval_id, gate.kind) == (
                    change.approval_id,
                    change.kind,
                ):
                    stored.edited_args, stored.answer = change.args, change.answer
                    stored.gate = dataclasses.replace(
                        gate,
                        status=GateStatus.DECIDED,
                        decision=change.decision,
                        reason=change.reason,
                        approver=change.approver,
                        decided_at=change.at,
                        decided_by=change.by,
                    )
                elif (
                    isinstance(change, GateClosed)
                    and (gate.execution_id, gate.call_id)
                    == (
                        change.execution_id,
                        change.call_id,
                    )
                ) or (
                    isinstance(change, GateSettled)
                    and gate.kind is GateKind.BUDGET
                    and gate.submission_id == change.submission_id
                ):
                    stored.gate = dataclasses.replace(
                        gate, status=GateStatus.CLOSED, closed_at=change.at
                    )

    def list(
        self,
        status: GateStatus | None = None,
        agent: str | None = None,
        instance: str | None = None,
        tool: str | None = None,
        limit: int = 100,
        after: str | None = None,
        kind: GateKind | None = None,
        tenant: str | None = None,
    ) -> list[Gate]:
        check_limit(limit)
        start = decode_cursor(after) if after is not None else None
        chosen = sorted(
            (
                stored
                for stored in self._gates.values()
                if (status is None or stored.gate.status is status)
                and (kind is None or stored.gate.kind is kind)
                and (tenant is None or stored.gate.tenant == tenant)
                and (agent is None or stored.gate.key.agent == agent)
                and (instance is None or stored.gate.key.instance == instance)
                and (tool is None or stored.gate.tool == tool)
                and (start is None or stored.gate.order_key > start)
            ),
            key=lambda stored: stored.gate.order_key,
        )
        return [_public(stored) for stored in chosen[:limit]]


def _public(stored: _Stored) -> Gate:
    """A fresh copy: no caller can change what is stored."""
    return dataclasses.replace(
        stored.gate,
        args=orjson.loads(stored.args),
        edited_args=None if stored.edited_args is None else orjson.loads(stored.edited_args),
        answer_schema=None if stored.answer_schema is None else orjson.loads(stored.answer_schema),
        answer=None if stored.answer is None else orjson.loads(stored.answer),
        metadata=None if stored.metadata is None else orjson.loads(stored.metadata),
    )
