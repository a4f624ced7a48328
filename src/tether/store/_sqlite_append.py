"""Bulk appends: every append of one group commit checked and inserted together.

The writer hands a run of consecutive append requests to :meth:`Appender.append_all`,
which checks each request in order against the conversations' state (so two requests
for one conversation see each other), seals the records, and inserts every accepted
record with a few multi-row ``INSERT`` statements, moves each conversation's row (its
anchor, last activity and size: the sessions index) with one ``UPDATE``, then indexes the
gates the records open, decide or close and the attachments they reference (statements only
for records that do). A request that fails its check writes nothing and fails alone; no
savepoint is needed because nothing is written until every check has run.

The state (fence, session, head) of recently written conversations is cached on the
writer. The cache is only trusted while ``PRAGMA data_version`` shows that no other
connection committed since our own last commit; other writes on this connection clear it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

from tether.errors import ConversationNotFound
from tether.records import Record, RecordDraft
from tether.store._common import record_time, seal_append, time_micros
from tether.store._sqlite_gates import index_gates
from tether.store._sqlite_kinds import kind_code
from tether.store._sqlite_log import (
    HEAD_STATE_COLUMNS,
    index_attachments,
    move_anchor,
    move_anchors,
    moves_floor,
)
from tether.store._sqlite_text import index_text
from tether.store._sqlite_usage import add_usage

__all__ = ("AppendRequest", "Appender")

_MAX_VARIABLES = 995  # below SQLite's 999 host parameters per statement, a multiple of 5
_ROWS_PER_INSERT = _MAX_VARIABLES // 5
_CACHE_LIMIT = 10_000
_INSERT_ONE = "INSERT INTO records (conversation, seq, kind, body, hash) VALUES (?,?,?,?,?)"


@dataclass(slots=True)
class AppendRequest:
    conversation_id: str
    drafts: Sequence[RecordDraft]
    expected_seq: int
    fence: int
    usage_holder: str | None = None  # whose reservations its completions give back
    result: list[Record] | None = None
    error: Exception | None = None
    touched: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _State:
    number: int
    fence: int
    session: str
    head: int
    head_hash: str
    head_time: str
    floor: int  # the activity floor the sessions index holds
    tenant: str | None  # whose usage what it spends adds to (fixed at its creation)


class Appender:
    """Appends for one writer connection, with its cache of conversation state."""

    def __init__(self) -> None:
        self._states: dict[str, _State] = {}
        self._data_version: int | None = None

    def forget(self) -> None:
        """Drop the cache: a non-append write or a rollback may have changed any state."""
        self._states.clear()
        self._data_version = None

    def committed(self) -> None:
        """Our transaction committed. Our own commits leave ``data_version`` unchanged, so the
        version read inside the transaction still describes the cache."""
        if len(self._states) > _CACHE_LIMIT:
            self._states.clear()

    def _refresh(self, conn: sqlite3.Connection, conversation_ids: list[str]) -> None:
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:  # another connection committed meanwhile
            self._states.clear()
            self._data_version = version
        missing = [cid for cid in conversation_ids if cid not in self._states]
        for start in range(0, len(missing), _MAX_VARIABLES):
            chunk = missing[start : start + _MAX_VARIABLES]
            marks = ",".join("?" * len(chunk))
            for cid, number, fence, session, seq, hash_, floor, body, tenant in conn.execute(
                f"SELECT {HEAD_STATE_COLUMNS} FROM conversations c WHERE c.id IN ({marks})",
                chunk,
            ):
                head_time = record_time(body) if body else ""
                self._states[cid] = _State(
                    number, fence, session, seq, hash_.hex(), head_time, floor, tenant
                )

    def append_all(self, conn: sqlite3.Connection, requests: Sequence[AppendRequest]) -> None:
        """Apply the requests in order, setting each one's ``result`` or ``error``."""
        if len(requests) == 1:
            self._refresh(conn, [requests[0].conversation_id])
        else:
            self._refresh(conn, list(dict.fromkeys(r.conversation_id for r in requests)))
        rows: list[tuple[int, int, int | str, bytes, bytes]] = []
        heads: dict[int, _State] = {}  # by conversation number: each anchor moves once
        added: dict[int, int] = {}  # the bytes of its records, by conversation number
        for request in requests:
            cid = request.conversation_id
            state = self._states.get(cid)
            try:
                if state is None:
                    raise ConversationNotFound(cid)
                sealed = seal_append(
                    request.drafts,
                    conversation_id=cid,
                    expected_seq=request.expected_seq,
                    fence=request.fence,
                    current_fence=state.fence,
                    session=state.session,
                    head=state.head,
                    head_hash=state.head_hash,
                    head_time=state.head_time,
                )
            except Exception as exc:  # a typed error, or a payload that cannot be encoded
                request.error = exc
                continue
            last = sealed[-1]
            state.head, state.head_hash, state.head_time = (
                last.seq,
                last.hash,
                record_time(last.canonical),
            )
            heads[state.number] = state
            number = state.number
            size = added.get(number, 0)
            for r in sealed:
                rows.append((number, r.seq, kind_code(r.kind), r.canonical, bytes.fromhex(r.hash)))
                size += len(r.canonical)
            added[number] = size
            request.result = sealed
            request.touched.append(cid)
            index_text(conn, number, sealed)
            if state.tenant is not None:  # before any insert: it only adds to other rows
                add_usage(conn, state.tenant, request.usage_holder or cid, sealed)
        if len(rows) == 1:  # one record per commit: a cached statement, no list to flatten
            conn.execute(_INSERT_ONE, rows[0])
            rows = []
        for start in range(0, len(rows), _ROWS_PER_INSERT):
            chunk = rows[start : start + _ROWS_PER_INSERT]
            # One multi-row statement: one step (and one GIL release) instead of one per row.
            conn.execute(
                "INSERT INTO records (conversation, seq, kind, body, hash) VALUES "
                + ",".join(["(?,?,?,?,?)"] * len(chunk)),
                [value for row in chunk for value in row],
            )
        # The anchor, the last activity and the size: one UPDATE of the row per conversation;
        # the activity floor only where it moves (about once a second a conversation).
        keeping: list[tuple[int, bytes, int, int, int]] = []
        moving: list[tuple[int, bytes, int, int, int]] = []
        for n, st in heads.items():
            micros = time_micros(st.head_time)
            moves = moves_floor(st.floor, micros)
            if moves:
                st.floor = micros
            anchor = (st.head, bytes.fromhex(st.head_hash), micros, added[n], n)
            (moving if moves else keeping).append(anchor)
        for anchors, floor in ((keeping, False), (moving, True)):
            if len(anchors) == 1:
                move_anchor(conn, anchors[0], floor=floor)
            elif anchors:
                move_anchors(conn, anchors, floor=floor)
        for request in requests:  # in request order: a conversation's gates change in seq order
            if request.result is not None:
                index_gates(conn, request.conversation_id, request.result)
                index_attachments(conn, request.conversation_id, request.result)
