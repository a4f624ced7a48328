"""The record log's envelope, its typed payloads, sealing and decoding (docs/architecture.md §3).

A :class:`RecordDraft` is what a writer proposes; a store *seals* it into a
:class:`Record` by assigning ``seq``, ``conversationId``, ``session`` and the chain
hashes. The canonical JSON of the envelope (everything but ``prevHash``/``hash``) is
computed once, hashed, stored verbatim and sent to SSE clients without re-encoding.

Example::

    from tether.records import RecordDraft, UserMessage

    draft = RecordDraft(UserMessage(body="hello"), submission_id="sub-1")
    [record] = await store.append(conversation_id, [draft], expected_seq=head, fence=fence)
    assert record.payload == UserMessage(body="hello")
    wire = record.to_json()  # b'{"conversationId":...,"prevHash":"...","hash":"..."}'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import orjson
from pydantic import ConfigDict, Field, ValidationError

from tether._canonical import canonical_json, encode_string, format_number, record_hash
from tether._ids import new_ulid
from tether._moved import moved
from tether._payloads import (
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    AssistantMessageStarted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    AttachmentRef,
    BudgetDecided,
    BudgetRequested,
    Compaction,
    ConversationCreated,
    ConversationParent,
    ExecutionEnded,
    ExecutionFailed,
    ExecutionStarted,
    InputAnswered,
    InputRequested,
    LogTruncated,
    ModelCalled,
    PatchMarked,
    Payload,
    SettlementStatus,
    Signal,
    SteerReceived,
    StepRecorded,
    SubmissionSettled,
    TaskFinished,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
    UserMessage,
    VersionChanged,
)
from tether._wire import WireModel
from tether.errors import LogTampered, RecordDecodeError
from tether.messages import Message

__all__ = (
    "PAYLOAD_TYPES",
    "Actor",
    "ApprovalDecided",
    "ApprovalRequested",
    "AssistantMessageCompleted",
    "AssistantMessageStarted",
    "AssistantTextDelta",
    "AssistantThinkingDelta",
    "AttachmentRef",
    "BudgetDecided",
    "BudgetRequested",
    "ChainVerifier",
    "Compaction",
    "ConversationCreated",
    "ConversationParent",
    "ExecutionEnded",
    "ExecutionFailed",
    "ExecutionStarted",
    "InputAnswered",
    "InputRequested",
    "LogTruncated",
    "ModelCalled",
    "PatchMarked",
    "Payload",
    "Record",
    "RecordDraft",
    "SettlementStatus",
    "Signal",
    "SteerReceived",
    "StepRecorded",
    "SubmissionSettled",
    "TaskFinished",
    "TaskSpawned",
    "ToolCalled",
    "ToolOutcome",
    "UserMessage",
    "VersionChanged",
    "decode_record",
    "format_time",
    "now_rfc3339",
    "seal",
    "verify_chain",
)

# Deprecated paths: the payloads' field types have one home, tether.messages; these still
# import from here, with a warning.
_MOVED = dict.fromkeys(("Mediation", "ToolOutcomeStatus", "Usage"), "tether.messages")


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)


PAYLOAD_TYPES: Final[Mapping[str, type[Payload]]] = {
    model.KIND: model
    for model in (
        ConversationCreated,
        UserMessage,
        Signal,
        ExecutionStarted,
        ModelCalled,
        AssistantMessageStarted,
        AssistantTextDelta,
        AssistantThinkingDelta,
        AssistantMessageCompleted,
        ToolCalled,
        ApprovalRequested,
        ApprovalDecided,
        InputRequested,
        InputAnswered,
        ToolOutcome,
        StepRecorded,
        SteerReceived,
        Compaction,
        TaskSpawned,
        TaskFinished,
        ExecutionEnded,
        ExecutionFailed,
        SubmissionSettled,
        LogTruncated,
        VersionChanged,
        PatchMarked,
        BudgetRequested,
        BudgetDecided,
    )
}
"""Every record kind and the model of its payload."""


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with microseconds and ``Z``: the one time format of records."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_second_prefix: tuple[int, str] = (-1, "")


def now_rfc3339() -> str:
    """The current time in the record time format."""
    global _second_prefix
    seconds, micros = divmod(time.time_ns() // 1000, 1_000_000)
    cached_second, prefix = _second_prefix
    if cached_second != seconds:  # strftime is slow: format the seconds once per second
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _second_prefix = (seconds, prefix)
    return f"{prefix}.{micros:06d}Z"


@dataclass(frozen=True, slots=True)
class RecordDraft:
    """A record a writer proposes to append; the store assigns its place in the chain.

    The payload is encoded to canonical JSON here, on the caller's side: an unencodable
    value fails before anything reaches a store, and the store's single writer only
    assembles bytes.
    """

    payload: Payload
    submission_id: str | None = None
    attempt_id: str | None = None
    execution_id: str | None = None
    turn: int | None = None
    id: str = field(default_factory=new_ulid)
    time: str = field(default_factory=now_rfc3339)
    payload_canonical: bytes = field(init=False, repr=False, compare=False)
    _pieces: tuple[bytes, bytes, bytes] = field(init=False, repr=False, compare=False)
    """The canonical envelope less what only the store knows (conversation, seq, session),
    encoded here: the single writer that seals the draft then only joins bytes."""

    def __post_init__(self) -> None:
        payload = canonical_json(self.payload.to_json_object())
        object.__setattr__(self, "payload_canonical", payload)
        # Sorted keys: attemptId < conversationId < executionId < id < kind < payload < seq
        # < session < submissionId < time < turn (see ``seal``).
        lead = b""
        if self.attempt_id is not None:
            lead = b'"attemptId":%s,' % encode_string(self.attempt_id)
        middle = b',"id":%s,"kind":%s,"payload":%s' % (
            encode_string(self.id),
            encode_string(self.payload.KIND),
            payload,
        )
        if self.execution_id is not None:
            middle = b',"executionId":%s%s' % (encode_string(self.execution_id), middle)
        tail = b',"time":%s' % encode_string(self.time)
        if self.submission_id is not None:
            tail = b',"submissionId":%s%s' % (encode_string(self.submission_id), tail)
        if self.turn is not None:
            tail += b',"turn":' + format_number(self.turn).encode()
        object.__setattr__(self, "_pieces", (lead, middle, tail + b"}"))

    @property
    def kind(self) -> str:
        return self.payload.KIND


class Record:
    """One sealed entry of a conversation log. Immutable.

    ``seq``, ``kind`` and the hashes are always at hand; the rest of the envelope is
    decoded from the stored canonical bytes on first access, so reading a page of
    records that go straight to an SSE client costs no JSON decoding at all.
    """

    __slots__ = (
        "_fields",
        "_head",
        "_messages",
        "_payload",
        "canonical",
        "hash",
        "kind",
        "prev_hash",
        "seq",
    )

    seq: int
    kind: str
    canonical: bytes
    prev_hash: str
    hash: str

    def __init__(
        self,
        seq: int,
        kind: str,
        canonical: bytes,
        prev_hash: str,
        hash: str,
        fields: dict[str, Any] | None = None,
    ) -> None:
        self.seq = seq
        self.kind = kind
        self.canonical = canonical
        self.prev_hash = prev_hash
        self.hash = hash
        self._fields = fields
        self._head: dict[str, Any] | None = None
        self._payload: Payload | None = None
        self._messages: tuple[Message, ...] | None = None
        """The chat messages this record stands for, once the transcript projected them:
        every view of the log then shares the same message objects, and the model-input hash
        of a history re-sent turn after turn resumes on their identity."""

    # --- envelope -------------------------------------------------------------------

    @property
    def fields(self) -> Mapping[str, Any]:
        """The envelope without hashes, as decoded JSON (camelCase keys). Read-only by contract."""
        if self._fields is None:
            self._fields = orjson.loads(self.canonical)
        return self._fields

    def _leading(self) -> Mapping[str, Any]:
        """The envelope's fields that sort before ``payload`` (ids and kind), decoded without
        the payload when the whole envelope is not at hand: taking a long log in reads its
        execution ids, not every payload."""
        fields = self._fields
        if fields is not None:
            return fields
        head = self._head
        if head is None:
            end = self.canonical.find(_PAYLOAD_KEY)
            if end < 0:
                return self.fields
            head = self._head = orjson.loads(self.canonical[:end] + b"}")
        return head

    @property
    def id(self) -> str:
        return str(self._leading()["id"])

    @property
    def conversation_id(self) -> str:
        return str(self._leading()["conversationId"])

    @property
    def session(self) -> str:
        return str(self.fields["session"])

    @property
    def time(self) -> str:
        return str(self.fields["time"])

    @property
    def submission_id(self) -> str | None:
        return self.fields.get("submissionId")

    @property
    def attempt_id(self) -> str | None:
        return self._leading().get("attemptId")

    @property
    def execution_id(self) -> str | None:
        return self._leading().get("executionId")

    @property
    def turn(self) -> int | None:
        return self.fields.get("turn")

    @property
    def payload(self) -> Payload:
        """The typed payload; :class:`RecordDecodeError` if the stored payload is malformed."""
        payload = self._payload
        if payload is None:
            if self._fields is None:
                payload = _payload_from_canonical(self.kind, self.canonical)
            if payload is None:  # the reference path, which also names what is malformed
                payload = _validate_payload(self.kind, self.fields.get("payload"))
            self._payload = payload
        return payload

    # --- wire -----------------------------------------------------------------------

    def to_json(self) -> bytes:
        """The wire form (SSE ``data``): the canonical envelope plus ``prevHash`` and ``hash``."""
        return b"".join(
            (
                self.canonical[:-1],
                b',"prevHash":"',
                self.prev_hash.encode(),
                b'","hash":"',
                self.hash.encode(),
                b'"}',
            )
        )

    def to_wire(self) -> dict[str, Any]:
        """The wire form as a dict."""
        return {**self.fields, "prevHash": self.prev_hash, "hash": self.hash}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (self.seq, self.hash, self.prev_hash, self.canonical) == (
            other.seq,
            other.hash,
            other.prev_hash,
            other.canonical,
        )

    def __hash__(self) -> int:
        return hash(self.hash)

    def __repr__(self) -> str:
        return f"Record(seq={self.seq}, kind={self.kind!r}, hash={self.hash[:12]}…)"


def seal(
    draft: RecordDraft, *, conversation_id: str, session: str, seq: int, prev_hash: str
) -> Record:
    """Place a draft at ``seq`` after ``prev_hash`` and compute its chain hash.

    The canonical envelope is assembled from canonical pieces in sorted key order
    (``attemptId`` < ``conversationId`` < ``executionId`` < ``id`` < ``kind`` < ``payload``
    < ``seq`` < ``session`` < ``submissionId`` < ``time`` < ``turn``), which equals
    ``canonical_json`` of the envelope (a property test holds it to that).
    """
    return seal_encoded(
        draft,
        conversation=encode_string(conversation_id),
        session=encode_string(session),
        conversation_id=conversation_id,
        seq=seq,
        prev_hash=prev_hash,
    )


def seal_encoded(
    draft: RecordDraft,
    *,
    conversation: bytes,
    session: bytes,
    conversation_id: str,
    seq: int,
    prev_hash: str,
) -> Record:
    """``seal`` with the conversation id and session already encoded (once for a batch)."""
    lead, middle, tail = draft._pieces
    canonical = b'{%s"conversationId":%s%s,"seq":%d,"session":%s%s' % (
        lead,
        conversation,
        middle,
        seq,
        session,
        tail,
    )
    kind = draft.payload.KIND
    record = Record(seq, kind, canonical, prev_hash, record_hash(canonical, prev_hash, seq))
    record._payload = draft.payload
    # The leading fields, as _leading would decode them: the writer's view takes in every
    # record it appends by its execution id.
    head: dict[str, Any] = {"conversationId": conversation_id, "id": draft.id, "kind": kind}
    if draft.attempt_id is not None:
        head["attemptId"] = draft.attempt_id
    if draft.execution_id is not None:
        head["executionId"] = draft.execution_id
    record._head = head
    return record


# --- decoding untrusted input ---------------------------------------------------------


class _WireEnvelope(WireModel):
    model_config = ConfigDict(strict=True)

    seq: int = Field(ge=1)
    id: str = Field(min_length=1)
    kind: str
    conversation_id: str = Field(min_length=1)
    session: str = Field(min_length=1)
    submission_id: str | None = None
    attempt_id: str | None = None
    execution_id: str | None = None
    turn: int | None = Field(default=None, ge=0)
    time: str
    payload: dict[str, Any]
    prev_hash: str
    hash: str


def _first_error(exc: ValidationError, prefix: str = "") -> RecordDecodeError:
    error = exc.errors()[0]
    path = ".".join(str(part) for part in error["loc"])
    return RecordDecodeError(error["msg"], field=prefix + path if path else prefix.rstrip("."))


_PAYLOAD_VALIDATORS: Final[Mapping[str, Callable[[object], Any]]] = {
    kind: model.__pydantic_validator__.validate_python for kind, model in PAYLOAD_TYPES.items()
}
"""What ``model_validate`` calls, without its per-call wrapper: a replay decodes every record."""


_PAYLOAD_JSON_VALIDATORS: Final[Mapping[str, tuple[bytes, Callable[[bytes], Any]]]] = {
    kind: (b'"kind":' + encode_string(kind), model.__pydantic_validator__.validate_json)
    for kind, model in PAYLOAD_TYPES.items()
}
"""Per kind: the envelope's ``kind`` member as canonical bytes, and the payload's JSON validator."""
_PAYLOAD_KEY: Final = b',"payload":'
_SEQ_KEY: Final = b',"seq":'


def _payload_from_canonical(kind: str, canonical: bytes) -> Payload | None:
    """The payload validated straight from its bytes inside a canonical envelope, with no
    decoded dict in between; ``None`` if they cannot be found that way or do not validate.

    In canonical JSON a quote inside a string is escaped, so ``,"`` only ever starts a key.
    The keys before ``payload`` hold strings, so the first ``,"payload":`` is the envelope's
    own (right after its ``kind``); those after it (``seq`` and on) hold scalars, so the last
    ``,"seq":`` ends the payload.
    """
    known = _PAYLOAD_JSON_VALIDATORS.get(kind)
    if known is None:
        return None
    kind_member, validate = known
    start = canonical.find(_PAYLOAD_KEY)
    end = canonical.rfind(_SEQ_KEY)
    if start < 0 or end < start or not canonical.endswith(kind_member, 0, start):
        return None
    try:
        payload: Payload = validate(canonical[start + len(_PAYLOAD_KEY) : end])
    except ValidationError:
        return None
    return payload


def _validate_payload(kind: str, payload: object) -> Payload:
    validate = _PAYLOAD_VALIDATORS.get(kind)
    if validate is None:
        raise RecordDecodeError(f"unknown record kind {kind!r}", field="kind")
    try:
        decoded: Payload = validate(payload)
    except ValidationError as exc:
        raise _first_error(exc, "payload.") from None
    return decoded


def decode_record(data: bytes | str | Mapping[str, Any]) -> Record:
    """Decode and validate a record from its wire form (JSON text or an already-parsed dict).

    Raises :class:`RecordDecodeError` naming the first bad field. The hashes are taken as
    given; use :func:`verify_chain` to check them.
    """
    if isinstance(data, bytes | str):
        try:
            data = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise RecordDecodeError(f"invalid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise RecordDecodeError("a record must be a JSON object")
    try:
        envelope = _WireEnvelope.model_validate(data)
    except ValidationError as exc:
        raise _first_error(exc) from None
    try:
        datetime.fromisoformat(envelope.time)
    except ValueError:
        raise RecordDecodeError("not an RFC 3339 timestamp", field="time") from None
    payload = _validate_payload(envelope.kind, envelope.payload)
    fields = {key: value for key, value in data.items() if key not in ("prevHash", "hash")}
    record = Record(
        envelope.seq,
        envelope.kind,
        canonical_json(fields),
        envelope.prev_hash,
        envelope.hash,
        fields,
    )
    record._payload = payload
    return record


def verify_chain(conversation_id: str, records: Iterable[Record], prev_hash: str = "") -> int:
    """Re-derive every hash of a log from its stored content; return the seq of the last
    record checked (how many records it checked, for a log that starts at seq 1).

    Nothing stored is trusted: each record's canonical bytes are decoded and re-encoded,
    its seq must follow the previous one, its ``prevHash`` must equal the previous hash
    and its hash must equal the one derived. A log whose head retention removed starts
    with its ``log_truncated`` record (see :class:`LogTruncated`): it holds the place and
    hashes of the last record removed, so the chain is verified from it on; anywhere else
    one is refused. Raises :class:`LogTampered` at the first record that fails.
    """
    chain = ChainVerifier(conversation_id, prev_hash)
    for record in records:
        chain.check(record)
    return chain.last_seq


class ChainVerifier:
    """:func:`verify_chain` one record at a time, for a log too long to hold: each
    :meth:`check` verifies the next record against the ones before it.

    Example::

        chain = ChainVerifier(conversation_id)
        for record in records:  # a generator reading a file, say
            chain.check(record)
        print(chain.last_seq, chain.last_hash)
    """

    __slots__ = ("_expected_seq", "conversation_id", "last_hash")

    def __init__(self, conversation_id: str, prev_hash: str = "") -> None:
        self.conversation_id = conversation_id
        self.last_hash = prev_hash
        """The hash of the last record checked (``prev_hash`` before the first)."""
        self._expected_seq = 1

    @property
    def last_seq(self) -> int:
        """The seq of the last record checked; 0 before the first."""
        return self._expected_seq - 1

    def check(self, record: Record, *, canonical: bool = False) -> Mapping[str, Any]:
        """Verify ``record``, the next one of the log (``LogTampered`` if it does not
        follow); its envelope, decoded. ``canonical``: its stored bytes must also be
        exactly canonical JSON, as a store keeps them (a hash is derived from the canonical
        form of what bytes decode to, so bytes that re-encode to it would pass)."""
        cid, seq = self.conversation_id, record.seq
        fields, encoded = _stored_fields(cid, record)
        if canonical and encoded != record.canonical:
            raise LogTampered(cid, seq, "stored bytes are not canonical JSON")
        if record.kind == LogTruncated.KIND:
            if self._expected_seq != 1 or self.last_hash:
                raise LogTampered(cid, seq, "a log_truncated record inside the log")
            if fields.get("payload", {}).get("lastHash") != record.hash:
                raise LogTampered(cid, seq, "log_truncated does not hold its hash")
            self.last_hash, self._expected_seq = record.hash, seq + 1
            return fields
        if seq != self._expected_seq:
            raise LogTampered(
                cid, self._expected_seq, f"found seq {seq} where {self._expected_seq} belongs"
            )
        if record.prev_hash != self.last_hash:
            raise LogTampered(cid, seq, "prevHash does not link to the previous record")
        if record_hash(encoded, self.last_hash, seq) != record.hash:
            raise LogTampered(cid, seq, "content hash mismatch")
        self.last_hash = record.hash
        self._expected_seq += 1
        return fields


def _stored_fields(conversation_id: str, record: Record) -> tuple[dict[str, Any], bytes]:
    """A stored record's envelope decoded and re-encoded, checked to agree with its seq and
    kind."""
    seq = record.seq
    try:
        fields = orjson.loads(record.canonical)
        canonical = canonical_json(fields)
    except (orjson.JSONDecodeError, ValueError) as exc:
        raise LogTampered(conversation_id, seq, f"stored record is not valid JSON: {exc}") from None
    if (
        not isinstance(fields, dict)
        or fields.get("seq") != seq
        or fields.get("kind") != record.kind
    ):
        raise LogTampered(conversation_id, seq, "stored envelope disagrees with its position")
    return fields, canonical
