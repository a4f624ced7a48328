"""Rules every backend shares, so each backend states them once and identically."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import orjson

from tether._canonical import encode_string
from tether._payloads import (
    Actor,
    AttachmentRef,
    ConversationCreated,
    ConversationParent,
    LogTruncated,
    SteerReceived,
    UserMessage,
)
from tether.errors import (
    Conflict,
    Fenced,
    InvalidCursor,
    LogTampered,
    RecordDecodeError,
    SeqOutOfRange,
)
from tether.messages import FilePart
from tether.records import Record, RecordDraft, format_time, seal_encoded, verify_chain
from tether.store._types import Conversation, SessionKey, Submission, SubmissionStatus

__all__ = (
    "ATTACHING_KINDS",
    "SUBMISSION_COLUMNS",
    "TREE_ROOT",
    "TREE_SIZE",
    "attachment_digests",
    "attachment_ref",
    "check_drafts",
    "check_fork_seq",
    "check_limit",
    "check_session_filter",
    "conversation_created_draft",
    "decode_session_cursor",
    "encode_session_cursor",
    "fork_parent",
    "from_micros",
    "record_micros",
    "record_time",
    "seal_append",
    "seal_batch",
    "seal_created",
    "submission_filter",
    "submission_from_row",
    "time_micros",
    "to_micros",
    "verify_anchored",
)

SUBMISSION_COLUMNS = (
    "id, dispatch_id, agent, instance, session, conversation_id, status, input, created_at, "
    "attempt_count, attempt_id, owner_id, lease_expires_at, fence, last_error, wait_reason, "
    "cancel_requested_at, settlement, settled_at, trace, "
    "parent_submission_id, parent_call_id, depth, wait_until, version, tenant, "
    "cancel_requested_by, priority"
)
"""The columns a submission row is read with, in the order ``submission_from_row`` takes."""

_BASE_COLUMNS = 20
"""How many of ``SUBMISSION_COLUMNS`` precede the parent link and the wait's deadline."""

TREE_ROOT = (
    "WITH RECURSIVE up(id, parent) AS ("
    "SELECT id, parent_submission_id FROM submissions WHERE id = {param} "
    "UNION ALL SELECT s.id, s.parent_submission_id FROM submissions s JOIN up ON s.id = up.parent"
    ") SELECT id FROM up WHERE parent IS NULL"
)
"""The root (depth 0) of the subagent tree of submission ``{param}`` (the backend's
placeholder), walking up its parent links by primary key; no row if an ancestor is gone."""

TREE_SIZE = (
    "WITH RECURSIVE below(id) AS ("
    "SELECT id FROM submissions WHERE parent_submission_id = {param} "
    "UNION ALL SELECT s.id FROM submissions s JOIN below ON s.parent_submission_id = below.id"
    ") SELECT count(*) FROM below"
)
"""How many submissions stand below the root ``{param}``, at every depth: each level read
through the index of children (``submissions_children``)."""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_micros(moment: datetime) -> int:
    """An aware datetime as integer microseconds since the epoch (how SQLite keeps times)."""
    if moment.tzinfo is None:
        raise ValueError("datetimes given to a store must be timezone-aware")
    return (moment - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    return _EPOCH + micros * _MICROSECOND


def conversation_created_draft(conversation: Conversation, by: Actor | None = None) -> RecordDraft:
    """The first record of a conversation; its id is the conversation id, so it is deterministic.
    ``by``: who made it (a fork's verified requester), if known."""
    key = conversation.key
    return RecordDraft(
        ConversationCreated(
            agent=key.agent,
            instance=key.instance,
            session=key.session,
            parent=conversation.parent,
            by=by,
        ),
        id=conversation.id,
        time=format_time(conversation.created_at),
    )


def seal_created(
    conversation: Conversation, prefix: Sequence[Record] = (), by: Actor | None = None
) -> Record:
    """The sealed ``conversation_created`` record of ``conversation``, chained after ``prefix``
    (a fork's inherited records; none for a new session), made by ``by`` if known."""
    [created] = seal_batch(
        [conversation_created_draft(conversation, by)],
        conversation_id=conversation.id,
        session=conversation.key.session,
        head=prefix[-1].seq if prefix else 0,
        prev_hash=prefix[-1].hash if prefix else "",
        prev_time=record_time(prefix[-1].canonical) if prefix else "",
    )
    return created


def fork_parent(conversation_id: str, at_seq: int) -> ConversationParent:
    return ConversationParent(conversation_id=conversation_id, seq=at_seq, reason="fork")


_STORE_WRITTEN: Final = frozenset({ConversationCreated.KIND, LogTruncated.KIND})


def check_drafts(drafts: Sequence[RecordDraft]) -> None:
    if not drafts:
        raise ValueError("append needs at least one record")
    for draft in drafts:
        if draft.kind in _STORE_WRITTEN:
            raise ValueError(f"{draft.kind} records are written by the store itself")


def check_limit(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")


def seal_append(
    drafts: Sequence[RecordDraft],
    *,
    conversation_id: str,
    expected_seq: int,
    fence: int,
    current_fence: int,
    session: str,
    head: int,
    head_hash: str,
    head_time: str,
) -> list[Record]:
    """Check an append against its conversation's state by the rules of docs/architecture.md
    §3, in their fixed order (CAS first, then the fence), and seal its drafts as the records
    after ``head``."""
    if expected_seq != head:
        raise Conflict(conversation_id, expected_seq, head)
    if fence < current_fence:
        raise Fenced(conversation_id, fence, current_fence)
    return seal_batch(
        drafts,
        conversation_id=conversation_id,
        session=session,
        head=head,
        prev_hash=head_hash,
        prev_time=head_time,
    )


def seal_batch(
    drafts: Sequence[RecordDraft],
    *,
    conversation_id: str,
    session: str,
    head: int,
    prev_hash: str,
    prev_time: str,
) -> list[Record]:
    """Seal drafts as the records following ``head`` (whose hash is ``prev_hash`` and whose
    time is ``prev_time``, empty before the first record).

    A draft is stamped before it reaches the store, so a writer whose clock stepped back, or
    one that lost a race to another writer, may hold a time earlier than the record it now
    follows: it takes its predecessor's time instead, and a log's times never go back.
    """
    sealed: list[Record] = []
    conversation, session_bytes = encode_string(conversation_id), encode_string(session)
    for seq, draft in enumerate(drafts, start=head + 1):
        if draft.time < prev_time:  # one format (RFC 3339, UTC, fixed width): text order
            draft = dataclasses.replace(draft, time=prev_time)
        record = seal_encoded(
            draft,
            conversation=conversation,
            session=session_bytes,
            conversation_id=conversation_id,
            seq=seq,
            prev_hash=prev_hash,
        )
        sealed.append(record)
        prev_hash, prev_time = record.hash, draft.time
    return sealed


_TIME_KEY = b'"time":"'


def record_time(canonical: bytes) -> str:
    """The ``time`` of a record from its canonical bytes, without decoding them: the
    envelope's ``time`` sorts after every key that can hold a payload, and only ``turn`` (a
    number) follows it, so its key is the last one in the bytes."""
    start = canonical.rfind(_TIME_KEY) + len(_TIME_KEY)
    return canonical[start : canonical.index(b'"', start)].decode()


def time_micros(text: str) -> int:
    """A record's ``time`` (RFC 3339, UTC) as integer microseconds since the epoch."""
    return to_micros(datetime.fromisoformat(text))


def record_micros(canonical: bytes) -> int:
    """The ``time`` of a record as integer microseconds since the epoch: a conversation's
    last activity, as the sessions index orders it."""
    return time_micros(record_time(canonical))


def verify_anchored(
    conversation_id: str, records: Iterable[Record], *, head: int, head_hash: str
) -> int:
    """Verify the chain, then that it ends where the conversation's anchor (the head seq and
    hash written in the same commit as every append) says it does: a log cut short, or
    lengthened, behind the store's back, is detected even though each record still links."""
    last: list[Record] = []

    def tracked() -> Iterator[Record]:
        for record in records:
            last[:] = (record,)
            yield record

    count = verify_chain(conversation_id, tracked())
    last_hash = last[0].hash if last else ""
    if count != head:
        raise LogTampered(
            conversation_id, min(count, head) + 1, f"log ends at {count}, head is {head}"
        )
    if last_hash != head_hash:
        raise LogTampered(
            conversation_id, count, f"log ends at {count}, head is {head} with another hash"
        )
    return count


def check_fork_seq(conversation_id: str, at_seq: int, head: int) -> None:
    if not 1 <= at_seq <= head:
        raise SeqOutOfRange(conversation_id, at_seq, head)


def attachment_ref(data: bytes, media_type: str) -> AttachmentRef:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return AttachmentRef(digest=digest, media_type=media_type, size=len(data))


def submission_from_row(row: Sequence[Any], moment: Callable[[Any], datetime | None]) -> Submission:
    """A row of ``SUBMISSION_COLUMNS`` as a submission; ``moment`` reads the backend's times
    (JSON columns hold canonical bytes). A row of the first twenty columns only (the
    columns before a child's parent link) reads as a root submission without a deadline or a
    version."""
    (
        parent_submission_id,
        parent_call_id,
        depth,
        wait_until,
        version,
        tenant,
        cancelled_by,
        priority,
    ) = (
        row[_BASE_COLUMNS : _BASE_COLUMNS + 8]
        if len(row) > _BASE_COLUMNS
        else (None, None, 0, None, None, None, None, 0)
    )
    (
        sid,
        dispatch_id,
        agent,
        instance,
        session,
        conversation_id,
        status,
        input_,
        created_at,
        attempt_count,
        attempt_id,
        owner_id,
        lease,
        fence,
        last_error,
        wait_reason,
        cancel,
        settlement,
        settled_at,
        trace,
    ) = row[:_BASE_COLUMNS]
    created = moment(created_at)
    assert created is not None  # NOT NULL in every schema
    return Submission(
        id=sid,
        dispatch_id=dispatch_id,
        key=SessionKey(agent, instance, session),
        conversation_id=conversation_id,
        status=SubmissionStatus(status),
        input=orjson.loads(input_),
        created_at=created,
        attempt_count=attempt_count,
        attempt_id=attempt_id,
        owner_id=owner_id,
        lease_expires_at=moment(lease),
        fence=fence,
        last_error=last_error,
        wait_reason=wait_reason,
        cancel_requested_at=moment(cancel),
        settlement=None if settlement is None else orjson.loads(settlement),
        settled_at=moment(settled_at),
        trace=None if trace is None else orjson.loads(trace),
        parent_submission_id=parent_submission_id,
        parent_call_id=parent_call_id,
        depth=depth,
        wait_until=moment(wait_until),
        version=version,
        tenant=tenant,
        cancel_requested_by=(
            None if cancelled_by is None else Actor.model_validate_json(bytes(cancelled_by))
        ),
        priority=priority,
    )


def submission_filter(
    status: SubmissionStatus | None,
    conversation_id: str | None,
    unsettled: bool,
    placeholder: str,
    tenant: str | None = None,
) -> tuple[str, list[str]]:
    """The ``WHERE`` clause (empty without filters) and parameters of ``list_submissions``.

    Only the filters given, each a plain term: ``(? IS NULL OR status = ?)`` reads every row;
    a tenant's, through its indexes led by the tenant (see the schemas).
    ``status <> 'settled'`` is spelled as the open-submissions partial index says, so that
    the planner may use it whenever the rows asked for cannot be settled ones."""
    terms: list[str] = []
    params: list[str] = []
    if status is not None:
        terms.append(f"status = {placeholder}")
        params.append(status.value)
    if conversation_id is not None:
        terms.append(f"conversation_id = {placeholder}")
        params.append(conversation_id)
    if tenant is not None and conversation_id is not None:
        # A conversation's submissions are all of its tenant: asked once of the conversation,
        # so that the conversation's index serves the listing, not the tenant's.
        terms.append(
            f"EXISTS (SELECT 1 FROM conversations WHERE id = {placeholder} "
            f"AND tenant = {placeholder})"
        )
        params += [conversation_id, tenant]
    elif tenant is not None:
        terms.append(f"tenant = {placeholder}")
        params.append(tenant)
    if unsettled or (status is not None and status is not SubmissionStatus.SETTLED):
        terms.append("status <> 'settled'")
    return (f"WHERE {' AND '.join(terms)} " if terms else ""), params


# --- attachments a log references -----------------------------------------------------

ATTACHING_KINDS: Final = frozenset({UserMessage.KIND, SteerReceived.KIND})
"""The record kinds whose payload may carry ``attachments`` (references by digest)."""
_ATTACHMENTS_KEY = b'"attachments":'
"""In the canonical bytes of a record of those kinds, only a payload with attachments holds
this sequence (an absent list is omitted, and a quote inside the body is escaped)."""


def attachment_digests(records: Iterable[Record]) -> list[str]:
    """The attachment digests ``records`` reference, each once, in order of first reference:
    what a store's index of references (the attachments an erase may remove) keeps for them.

    A record of any other kind costs a set lookup, one of those kinds without attachments a
    search of its bytes; a sealed record's payload is at hand, a stored one's is decoded. A
    payload that does not decode references nothing (verification reports it)."""
    digests: dict[str, None] = {}
    for record in records:
        if record.kind == LogTruncated.KIND:  # the transcript it carries may show some
            digests.update(dict.fromkeys(_carried_digests(record)))
            continue
        if record.kind not in ATTACHING_KINDS or _ATTACHMENTS_KEY not in record.canonical:
            continue
        try:
            payload = record.payload
        except RecordDecodeError:
            continue
        if isinstance(payload, UserMessage | SteerReceived):
            digests.update(dict.fromkeys(ref.digest for ref in payload.attachments or ()))
    return list(digests) if digests else []


def _carried_digests(anchor: Record) -> list[str]:
    if _DIGEST_KEY not in anchor.canonical:
        return []
    try:
        payload = anchor.payload
    except RecordDecodeError:
        return []
    assert isinstance(payload, LogTruncated)
    return [
        part.digest
        for message in payload.messages
        for part in message.parts
        if isinstance(part, FilePart)
    ]


_DIGEST_KEY = b'"digest":'


# --- the sessions index ---------------------------------------------------------------

_CURSOR_MICROS = re.compile(r"-?[0-9]{1,19}")  # ASCII digits only: int() takes "¹" and "1_0"
_CURSOR_TAG = "s"
"""Leads a sessions cursor, so that no gate cursor passes for one (nor one for a gate's)."""
_FIRST_MICROS = to_micros(datetime(1, 1, 2, tzinfo=UTC))
_LAST_MICROS = to_micros(datetime(9999, 12, 30, tzinfo=UTC))


def encode_session_cursor(last_activity: int, conversation_id: str) -> str:
    """The cursor of a sessions row: its place in the order (last activity in microseconds,
    newest first, then the conversation id)."""
    text = f"{_CURSOR_TAG}:{last_activity}:{conversation_id}"
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode("ascii")


def decode_session_cursor(cursor: str) -> tuple[int, str]:
    """The place ``cursor`` names, ``(last activity micros, conversation id)``: the rows past
    it are those older, or as old with a greater id. ``InvalidCursor`` for anything
    ``encode_session_cursor`` did not write (checked before any store is asked)."""
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        tag, micros, conversation_id = raw.decode("utf-8").split(":", 2)
        if tag != _CURSOR_TAG or not _CURSOR_MICROS.fullmatch(micros):
            raise ValueError("not a sessions cursor")
        moment = int(micros)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursor("not a cursor a listing handed out") from None
    if not conversation_id or "\x00" in conversation_id:
        raise InvalidCursor("not a cursor a listing handed out")
    if not _FIRST_MICROS <= moment <= _LAST_MICROS:
        raise InvalidCursor("not a cursor a listing handed out")
    return moment, conversation_id


def check_session_filter(agent: str | None, instance: str | None) -> None:
    """A sessions listing filters by agent, or by agent and instance: an instance names one
    only within its agent."""
    if instance is not None and agent is None:
        raise ValueError("list_sessions filters by instance only together with agent")
