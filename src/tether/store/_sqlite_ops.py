"""The SQL of every store operation, as plain functions over a connection.

Write functions run on the writer thread inside its transaction and append the ids
of the conversations they wrote to ``touched``; read functions run on any reader
connection. Both raise only Tether errors (the caller maps ``sqlite3.Error``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from tether._canonical import canonical_json
from tether._gc import BULK, collector_paused
from tether._payloads import AttachmentRef, ConversationParent
from tether.errors import (
    AttachmentNotFound,
    ClaimLost,
    ConversationNotFound,
    DispatchConflict,
    SessionExists,
    SubmissionNotFound,
)
from tether.records import Record, RecordDraft
from tether.store._common import (
    SUBMISSION_COLUMNS,
    attachment_ref,
    check_fork_seq,
    fork_parent,
    from_micros,
    record_time,
    seal_append,
    seal_created,
    submission_filter,
    submission_from_row,
    to_micros,
)
from tether.store._sqlite_gates import index_gates
from tether.store._sqlite_schema import kind_code, kind_name
from tether.store._types import (
    Admission,
    Attempt,
    ClaimSettlement,
    Conversation,
    NewSubmission,
    SessionKey,
    Submission,
    SubmissionStatus,
)

RECORD_COLUMNS = "seq, kind, body, hash"
_CONVERSATION_COLUMNS = "id, agent, instance, session, created_at, parent"


def from_micros_or_none(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


def _submission(row: tuple[Any, ...]) -> Submission:
    return submission_from_row(row, from_micros_or_none)


# --- conversations and records --------------------------------------------------------


def _conversation(row: tuple[Any, ...]) -> Conversation:
    cid, agent, instance, session, created_at, parent = row
    return Conversation(
        cid,
        SessionKey(agent, instance, session),
        from_micros(created_at),
        None if parent is None else ConversationParent.model_validate_json(parent),
    )


def get_conversation(conn: sqlite3.Connection, conversation_id: str) -> Conversation:
    row = conn.execute(
        f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return _conversation(row)


def find_conversation(conn: sqlite3.Connection, key: SessionKey) -> Conversation | None:
    row = conn.execute(
        f"SELECT {_CONVERSATION_COLUMNS} FROM conversations "
        "WHERE agent = ? AND instance = ? AND session = ?",
        (key.agent, key.instance, key.session),
    ).fetchone()
    return None if row is None else _conversation(row)


HEAD_STATE_COLUMNS = (
    "c.id, c.number, c.fence, c.session, c.head, c.head_hash, "
    "(SELECT body FROM records WHERE conversation = c.number AND seq = c.head)"
)
"""What an append checks and seals against, from a conversation row ``c``: its anchor and
the head record's bytes (for its time)."""

_NUMBER = "(SELECT number FROM conversations WHERE id = ?)"
"""A conversation's number, by id: what a records row holds instead of the id."""


def insert_records(conn: sqlite3.Connection, number: int, records: Sequence[Record]) -> None:
    conn.executemany(
        "INSERT INTO records (conversation, seq, kind, body, hash) VALUES (?, ?, ?, ?, ?)",
        [(number, r.seq, kind_code(r.kind), r.canonical, bytes.fromhex(r.hash)) for r in records],
    )


def _create_conversation(
    conn: sqlite3.Connection,
    conversation: Conversation,
    touched: list[str],
    prefix: Sequence[Record] = (),
) -> None:
    key = conversation.key
    parent = conversation.parent
    created = seal_created(conversation, prefix)
    number = conn.execute(
        "INSERT INTO conversations (id, agent, instance, session, created_at, parent, head, "
        "head_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING number",
        (
            conversation.id,
            key.agent,
            key.instance,
            key.session,
            to_micros(conversation.created_at),
            None if parent is None else canonical_json(parent.to_json_object()),
            created.seq,
            bytes.fromhex(created.hash),
        ),
    ).fetchone()[0]
    insert_records(conn, number, [*prefix, created])
    touched.append(conversation.id)


def ensure_conversation(
    conn: sqlite3.Connection,
    key: SessionKey,
    conversation_id: str,
    created_at: datetime,
    touched: list[str],
) -> tuple[Conversation, bool]:
    existing = find_conversation(conn, key)
    if existing is not None:
        return existing, False
    conversation = Conversation(conversation_id, key, created_at)
    _create_conversation(conn, conversation, touched)
    return conversation, True


def mint_fence(conn: sqlite3.Connection, conversation_id: str) -> int:
    row = conn.execute(
        "UPDATE conversations SET fence = fence + 1 WHERE id = ? RETURNING fence",
        (conversation_id,),
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return int(row[0])


def head(conn: sqlite3.Connection, conversation_id: str) -> int:
    return anchor(conn, conversation_id)[0]


def anchor(conn: sqlite3.Connection, conversation_id: str) -> tuple[int, str]:
    """The head seq and hash the conversation row holds (moved by every append)."""
    row = conn.execute(
        "SELECT head, head_hash FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return int(row[0]), bytes(row[1]).hex()


def move_anchors(conn: sqlite3.Connection, heads: Iterable[tuple[int, bytes, int]]) -> None:
    """Set each ``(head, head_hash, conversation number)``: in the commit of the append."""
    conn.executemany("UPDATE conversations SET head = ?, head_hash = ? WHERE number = ?", heads)


def chained(rows: Iterable[tuple[Any, ...]], prev_hash: str = "") -> Iterator[Record]:
    """Stored rows, in seq order, as records: each one's ``prev_hash`` is the hash of the row
    before it (hashes are stored as raw bytes, carried as hex)."""
    for seq, kind, body, hash_ in rows:
        hash_hex = hash_.hex()
        yield Record(seq, kind_name(kind), body, prev_hash, hash_hex)
        prev_hash = hash_hex


def read(
    conn: sqlite3.Connection, conversation_id: str, after_seq: int, limit: int
) -> list[Record]:
    # From the record at after_seq itself: its hash is the first one's prev_hash.
    cursor = conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM records WHERE conversation = {_NUMBER} AND seq >= ? "
        "ORDER BY seq LIMIT ?",
        (conversation_id, after_seq, limit + 1),
    )
    # The collector is paused for what is there, not for what was asked: most reads are of
    # a few new records however large their page.
    rows = cursor.fetchmany(BULK)
    with collector_paused(len(rows)):
        if len(rows) == BULK:
            rows += cursor.fetchall()
        prev_hash = ""
        if rows and rows[0][0] == after_seq:
            prev_hash = rows[0][3].hex()
            del rows[0]
        records = list(chained(rows[:limit], prev_hash))
    if not records:
        head(conn, conversation_id)  # raises ConversationNotFound for an unknown id
    return records


def fork(
    conn: sqlite3.Connection,
    conversation_id: str,
    at_seq: int,
    key: SessionKey,
    new_conversation_id: str,
    created_at: datetime,
    touched: list[str],
) -> Conversation:
    check_fork_seq(conversation_id, at_seq, head(conn, conversation_id))
    if find_conversation(conn, key) is not None:
        raise SessionExists(str(key))
    prefix = read(conn, conversation_id, 0, at_seq)
    conversation = Conversation(
        new_conversation_id, key, created_at, fork_parent(conversation_id, at_seq)
    )
    _create_conversation(conn, conversation, touched, prefix)
    # A snapshot of the shared records describes the child's first records as well.
    conn.execute(
        f"INSERT INTO snapshots (conversation, seq, body) SELECT {_NUMBER}, seq, body "
        f"FROM snapshots WHERE conversation = {_NUMBER} AND seq <= ?",
        (new_conversation_id, conversation_id, at_seq),
    )
    return conversation


def put_snapshot(conn: sqlite3.Connection, conversation_id: str, seq: int, body: bytes) -> None:
    cursor = conn.execute(
        "INSERT INTO snapshots (conversation, seq, body) "
        "SELECT number, ?, ? FROM conversations WHERE id = ? "
        "ON CONFLICT (conversation) DO UPDATE SET seq = excluded.seq, body = excluded.body "
        "WHERE excluded.seq > snapshots.seq",
        (seq, body, conversation_id),
    )
    if cursor.rowcount == 0:
        head(conn, conversation_id)  # ConversationNotFound, or an older snapshot: kept as is


def get_snapshot(conn: sqlite3.Connection, conversation_id: str) -> tuple[int, bytes] | None:
    row = conn.execute(
        f"SELECT seq, body FROM snapshots WHERE conversation = {_NUMBER}", (conversation_id,)
    ).fetchone()
    return None if row is None else (int(row[0]), bytes(row[1]))


# --- submissions ----------------------------------------------------------------------


def get_submission(conn: sqlite3.Connection, submission_id: str) -> Submission:
    row = conn.execute(
        f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE id = ?", (submission_id,)
    ).fetchone()
    if row is None:
        raise SubmissionNotFound(submission_id)
    return _submission(row)


def list_submissions(
    conn: sqlite3.Connection,
    status: SubmissionStatus | None,
    conversation_id: str | None,
    unsettled: bool,
) -> list[Submission]:
    where, params = submission_filter(status, conversation_id, unsettled, "?")
    rows = conn.execute(
        f"SELECT {SUBMISSION_COLUMNS} FROM submissions {where}ORDER BY position", params
    ).fetchall()
    return [_submission(row) for row in rows]


_HEAD_OF_SESSION = (
    "position = (SELECT MIN(o.position) FROM submissions o "
    "WHERE o.conversation_id = submissions.conversation_id AND o.status != 'settled')"
)


def list_runnable(conn: sqlite3.Connection, limit: int) -> list[Submission]:
    rows = conn.execute(
        f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE status = 'queued' AND "
        f"{_HEAD_OF_SESSION} ORDER BY position LIMIT ?",
        (limit,),
    ).fetchall()
    return [_submission(row) for row in rows]


def list_expired_leases(conn: sqlite3.Connection, now: datetime) -> list[Submission]:
    rows = conn.execute(
        f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE status = 'running' "
        "AND lease_expires_at <= ? ORDER BY position",
        (to_micros(now),),
    ).fetchall()
    return [_submission(row) for row in rows]


def admit(conn: sqlite3.Connection, new: NewSubmission, touched: list[str]) -> Admission:
    payload = canonical_json(new.input)
    key = new.key
    row = conn.execute(
        "SELECT id, input FROM submissions WHERE agent = ? AND instance = ? AND session = ? "
        "AND dispatch_id = ?",
        (key.agent, key.instance, key.session, new.idempotency_key),
    ).fetchone()
    if row is not None:
        if row[1] != payload:
            raise DispatchConflict(new.idempotency_key, str(key))
        return Admission(get_submission(conn, row[0]), created=False)
    if conn.execute("SELECT 1 FROM submissions WHERE id = ?", (new.id,)).fetchone():
        raise DispatchConflict(new.id, str(key))
    conversation, _ = ensure_conversation(conn, key, new.conversation_id, new.created_at, touched)
    conn.execute(
        "INSERT INTO submissions (id, dispatch_id, agent, instance, session, conversation_id, "
        "status, input, created_at, trace) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)",
        (
            new.id,
            new.idempotency_key,
            key.agent,
            key.instance,
            key.session,
            conversation.id,
            payload,
            to_micros(new.created_at),
            canonical_json(dict(new.trace)) if new.trace else None,
        ),
    )
    return Admission(get_submission(conn, new.id), created=True)


def admit_and_claim(
    conn: sqlite3.Connection,
    new: NewSubmission,
    attempt_id: str,
    owner_id: str,
    lease_expires_at: datetime,
    now: datetime,
    touched: list[str],
) -> Admission:
    admission = admit(conn, new, touched)
    if not admission.created:
        return admission
    try:
        claimed = claim(conn, new.id, attempt_id, owner_id, lease_expires_at, now)
    except ClaimLost:  # behind an unsettled submission of its session: it waits its turn
        return admission
    return Admission(claimed, created=True)


def _update_owned(
    conn: sqlite3.Connection,
    submission_id: str,
    attempt_id: str | None,
    action: str,
    assignments: str,
    params: tuple[Any, ...],
    *,
    from_status: SubmissionStatus = SubmissionStatus.RUNNING,
) -> Submission:
    """Apply ``assignments`` if in ``from_status`` (and owned by ``attempt_id``, if given)."""
    row = conn.execute(
        f"UPDATE submissions SET {assignments} WHERE id = ? AND status = ? "
        "AND (? IS NULL OR attempt_id = ?) RETURNING id",
        (*params, submission_id, from_status.value, attempt_id, attempt_id),
    ).fetchone()
    if row is None:
        current = get_submission(conn, submission_id)  # raises SubmissionNotFound
        owner = f" under attempt {attempt_id}" if attempt_id is not None else ""
        raise ClaimLost(
            submission_id,
            f"cannot {action}: status {current.status}, attempt {current.attempt_id}, "
            f"not {from_status}{owner}",
        )
    return get_submission(conn, submission_id)


def claim(
    conn: sqlite3.Connection,
    submission_id: str,
    attempt_id: str,
    owner_id: str,
    lease_expires_at: datetime,
    now: datetime,
) -> Submission:
    current = get_submission(conn, submission_id)
    if current.status is not SubmissionStatus.QUEUED:
        raise ClaimLost(submission_id, f"cannot claim: status is {current.status}")
    is_head = conn.execute(
        f"SELECT 1 FROM submissions WHERE id = ? AND {_HEAD_OF_SESSION}", (submission_id,)
    ).fetchone()
    if not is_head:
        raise ClaimLost(
            submission_id, "cannot claim: an earlier submission of its session is unsettled"
        )
    fence = mint_fence(conn, current.conversation_id)
    # ``number`` orders the attempt markers; ``attempt_count`` is the budget (a refund lowers it).
    (number,) = conn.execute(
        "SELECT COUNT(*) + 1 FROM attempts WHERE submission_id = ?", (submission_id,)
    ).fetchone()
    conn.execute(
        "INSERT INTO attempts (submission_id, number, id, owner_id, fence, started_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (submission_id, number, attempt_id, owner_id, fence, to_micros(now)),
    )
    return _update_owned(
        conn,
        submission_id,
        None,
        "claim",
        "status = 'running', attempt_count = attempt_count + 1, attempt_id = ?, owner_id = ?, "
        "lease_expires_at = ?, fence = ?, wait_reason = NULL",
        (attempt_id, owner_id, to_micros(lease_expires_at), fence),
        from_status=SubmissionStatus.QUEUED,
    )


def claim_runnable(
    conn: sqlite3.Connection,
    attempt_ids: Sequence[str],
    owner_id: str,
    lease_expires_at: datetime,
    now: datetime,
) -> list[Submission]:
    # One write transaction: no other writer can take these heads in between.
    heads = list_runnable(conn, len(attempt_ids))
    return [
        claim(conn, head.id, attempt_id, owner_id, lease_expires_at, now)
        for head, attempt_id in zip(heads, attempt_ids, strict=False)
    ]


def list_attempts(conn: sqlite3.Connection, submission_id: str) -> list[Attempt]:
    get_submission(conn, submission_id)
    rows = conn.execute(
        "SELECT id, submission_id, owner_id, fence, number, started_at FROM attempts "
        "WHERE submission_id = ? ORDER BY number",
        (submission_id,),
    ).fetchall()
    return [Attempt(r[0], r[1], r[2], r[3], r[4], from_micros(r[5])) for r in rows]


def renew_lease(
    conn: sqlite3.Connection, submission_id: str, attempt_id: str, lease: datetime
) -> Submission:
    return _update_owned(
        conn,
        submission_id,
        attempt_id,
        "renew the lease",
        "lease_expires_at = ?",
        (to_micros(lease),),
    )


def release(
    conn: sqlite3.Connection,
    submission_id: str,
    attempt_id: str,
    last_error: str | None,
    refund_attempt: bool,
) -> Submission:
    return _update_owned(
        conn,
        submission_id,
        attempt_id,
        "release",
        "status = 'queued', attempt_id = NULL, owner_id = NULL, lease_expires_at = NULL, "
        "last_error = COALESCE(?, last_error), attempt_count = attempt_count - ?",
        (last_error, 1 if refund_attempt else 0),
    )


def park(
    conn: sqlite3.Connection,
    submission_id: str,
    attempt_id: str,
    reason: str,
    expected_seq: int | None,
) -> Submission:
    # One transaction: the head read here is the head when the park commits.
    current = get_submission(conn, submission_id)
    moved = expected_seq is not None and head(conn, current.conversation_id) != expected_seq
    return _update_owned(
        conn,
        submission_id,
        attempt_id,
        "park",
        "status = CASE WHEN ? OR cancel_requested_at IS NOT NULL THEN 'queued' ELSE 'waiting' "
        "END, attempt_id = NULL, owner_id = NULL, lease_expires_at = NULL, wait_reason = ?, "
        "attempt_count = attempt_count - 1",
        (moved, reason),
    )


def unpark(conn: sqlite3.Connection, submission_id: str) -> Submission:
    return _update_owned(
        conn,
        submission_id,
        None,
        "unpark",
        "status = 'queued'",
        (),
        from_status=SubmissionStatus.WAITING,
    )


def request_cancel(conn: sqlite3.Connection, submission_id: str, now: datetime) -> Submission:
    # A waiting submission is requeued: nothing it waits for will come.
    conn.execute(
        "UPDATE submissions SET cancel_requested_at = COALESCE(cancel_requested_at, ?), "
        "status = CASE status WHEN 'waiting' THEN 'queued' ELSE status END "
        "WHERE id = ? AND status != 'settled'",
        (to_micros(now), submission_id),
    )
    return get_submission(conn, submission_id)


def reserve_settlement(
    conn: sqlite3.Connection, submission_id: str, attempt_id: str, settlement: Mapping[str, Any]
) -> Submission:
    return _update_owned(
        conn,
        submission_id,
        attempt_id,
        "reserve the settlement",
        "status = 'terminalizing', lease_expires_at = NULL, settlement = ?",
        (canonical_json(settlement),),
    )


def settle_absorbed(
    conn: sqlite3.Connection, submission_id: str, settlement: Mapping[str, Any], now: datetime
) -> Submission:
    payload = canonical_json(settlement)
    current = get_submission(conn, submission_id)
    if current.status is SubmissionStatus.SETTLED:
        return current
    return _update_owned(
        conn,
        submission_id,
        None,
        "settle as absorbed",
        "status = 'settled', settlement = ?, settled_at = ?",
        (payload, to_micros(now)),
        from_status=SubmissionStatus.QUEUED,
    )


def finalize_settlement(conn: sqlite3.Connection, submission_id: str, now: datetime) -> Submission:
    current = get_submission(conn, submission_id)
    if current.status is SubmissionStatus.SETTLED:
        return current
    return _update_owned(
        conn,
        submission_id,
        None,
        "finalize",
        "status = 'settled', settled_at = ?",
        (to_micros(now),),
        from_status=SubmissionStatus.TERMINALIZING,
    )


def owner_has_claims(conn: sqlite3.Connection, owner_id: str) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM submissions WHERE status = 'running' AND owner_id = ? LIMIT 1",
            (owner_id,),
        ).fetchone()
    )


def ping(conn: sqlite3.Connection, now: datetime) -> None:
    """A one-row write: what proves the database takes writes (``Store.ping``)."""
    conn.execute(
        "INSERT INTO heartbeat (singleton, at) VALUES (1, ?) "
        "ON CONFLICT (singleton) DO UPDATE SET at = excluded.at",
        (to_micros(now),),
    )


# --- attachments ----------------------------------------------------------------------


def append_settled(
    conn: sqlite3.Connection,
    conversation_id: str,
    drafts: Sequence[RecordDraft],
    expected_seq: int,
    fence: int,
    settle: ClaimSettlement,
    touched: list[str],
) -> list[Record]:
    """Settle the owned submission, then append: the writer's transaction (or savepoint)
    rolls the settlement back if the append is refused."""
    _update_owned(
        conn,
        settle.submission_id,
        settle.attempt_id,
        "settle",
        "status = 'settled', lease_expires_at = NULL, settlement = ?, settled_at = ?",
        (canonical_json(settle.settlement), to_micros(settle.settled_at)),
    )
    return append_checked(conn, conversation_id, drafts, expected_seq, fence, touched)


def append_decision(
    conn: sqlite3.Connection,
    conversation_id: str,
    drafts: Sequence[RecordDraft],
    expected_seq: int,
    wake: str | None,
    touched: list[str],
) -> list[Record]:
    """Append at the conversation's current fence and wake the submission waiting for the
    decision: the writer's transaction (or savepoint) rolls the wake-up back if the append
    is refused."""
    row = conn.execute(
        "SELECT fence FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    fence = int(row[0])
    if wake is not None:
        conn.execute(
            "UPDATE submissions SET status = 'queued' WHERE id = ? AND status = 'waiting'", (wake,)
        )
    return append_checked(conn, conversation_id, drafts, expected_seq, fence, touched)


def append_checked(
    conn: sqlite3.Connection,
    conversation_id: str,
    drafts: Sequence[RecordDraft],
    expected_seq: int,
    fence: int,
    touched: list[str],
) -> list[Record]:
    """An append inside a transaction that writes more than the records."""
    row = conn.execute(
        f"SELECT {HEAD_STATE_COLUMNS} FROM conversations c WHERE c.id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    _, number, current_fence, session, current_head, head_hash, head_body = row
    sealed = seal_append(
        drafts,
        conversation_id=conversation_id,
        expected_seq=expected_seq,
        fence=fence,
        current_fence=current_fence,
        session=session,
        head=current_head,
        head_hash=head_hash.hex(),
        head_time=record_time(head_body) if head_body else "",
    )
    insert_records(conn, number, sealed)
    move_anchors(conn, [(sealed[-1].seq, bytes.fromhex(sealed[-1].hash), number)])
    index_gates(conn, conversation_id, sealed)
    touched.append(conversation_id)
    return sealed


def put_attachment(conn: sqlite3.Connection, data: bytes, media_type: str) -> AttachmentRef:
    ref = attachment_ref(data, media_type)
    conn.execute(
        "INSERT INTO attachments (digest, media_type, size, data) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (digest) DO NOTHING",
        (ref.digest, ref.media_type, ref.size, data),
    )
    return get_attachment(conn, ref.digest)[0]


def get_attachment(conn: sqlite3.Connection, digest: str) -> tuple[AttachmentRef, bytes]:
    row = conn.execute(
        "SELECT media_type, size, data FROM attachments WHERE digest = ?", (digest,)
    ).fetchone()
    if row is None:
        raise AttachmentNotFound(digest)
    return AttachmentRef(digest=digest, media_type=row[0], size=row[1]), bytes(row[2])
