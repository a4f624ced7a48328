"""The SQLite store's gate index: kept in the commit of every append, listed by index.

Every append path (the writer's bulk appends and the checked appends of decisions and
settlements) calls :func:`index_gates` with the records it sealed, inside its transaction;
the v8 migration calls :func:`backfill` once, which runs the same code over the logs (after
the last step, so on the schema this code writes: v12's kinds included).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator, Sequence

from tether._payloads import ConversationParent
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    InputAnswered,
    InputRequested,
    Record,
    ToolOutcome,
)
from tether.store._common import check_limit, from_micros, to_micros
from tether.store._gates import (
    DENIED_MARK,
    Gate,
    GateKind,
    GateStatus,
    decode_cursor,
    gate_changes,
    has_gate_changes,
    index_pages,
    merge_pages,
)
from tether.store._gates_sql import gate_from_row, gate_query, gate_statements
from tether.store._sqlite_kinds import kind_code, kind_name

__all__ = ("backfill", "index_gates", "list_gates")


def index_gates(conn: sqlite3.Connection, conversation_id: str, records: Sequence[Record]) -> None:
    """Apply what ``records``, just inserted into ``conversation_id``'s log, do to its gates:
    in the caller's transaction, so they commit (or roll back) with the records."""
    if not has_gate_changes(records):
        return
    for statement, params in gate_statements(
        conversation_id, gate_changes(records), placeholder="?", moment=to_micros, same="IS"
    ):
        conn.execute(statement, params)


def list_gates(
    conn: sqlite3.Connection,
    status: GateStatus | None,
    agent: str | None,
    instance: str | None,
    tool: str | None,
    limit: int,
    after: str | None,
    kind: GateKind | None,
    tenant: str | None = None,
) -> list[Gate]:
    check_limit(limit)
    start = decode_cursor(after) if after is not None else None
    past = None if start is None else (to_micros(start[0]), start[1], start[2])
    filters = {"agent": agent, "instance": instance, "tool": tool, "tenant": tenant}

    def page(one: GateStatus, sort: GateKind) -> list[Gate]:
        query, params = gate_query(one, sort, filters, past, limit, "?")
        return [gate_from_row(row, from_micros) for row in conn.execute(query, params)]

    pages = index_pages(status, kind)
    if len(pages) == 1:
        return page(*pages[0])
    conn.execute("BEGIN")  # one snapshot for every page: no gate seen twice, or missed
    try:
        return merge_pages([page(one, sort) for one, sort in pages], limit)
    finally:
        conn.execute("COMMIT")


_OPENS_OR_DECIDES = tuple(
    kind_code(kind)
    for kind in (
        ApprovalRequested.KIND,
        ApprovalDecided.KIND,
        InputRequested.KIND,
        InputAnswered.KIND,
    )
)
_OUTCOME = kind_code(ToolOutcome.KIND)


def backfill(conn: sqlite3.Connection) -> None:
    """Index the gates of every log written before the index existed (the v8 migration):
    each conversation's own records that may change a gate, in seq order, through the code
    every append runs. A fork's copied records are its parent's: skipped."""
    forks = {
        cid: ConversationParent.model_validate_json(parent).seq
        for cid, parent in conn.execute(
            "SELECT id, parent FROM conversations WHERE parent IS NOT NULL"
        )
    }
    rows = conn.execute(
        "SELECT c.id, r.seq, r.kind, r.body FROM records r "
        "JOIN conversations c ON c.number = r.conversation "
        "WHERE r.kind IN (?, ?, ?, ?) OR (r.kind = ? AND instr(r.body, ?) > 0) "
        "ORDER BY r.conversation, r.seq",
        (*_OPENS_OR_DECIDES, _OUTCOME, DENIED_MARK),
    ).fetchall()
    for cid, group in itertools.groupby(rows, key=lambda row: str(row[0])):
        index_gates(conn, cid, list(_records(group, forks.get(cid, 0))))


def _records(rows: Iterator[tuple[str, int, int | str, bytes]], fork_seq: int) -> Iterator[Record]:
    for _, seq, kind, body in rows:
        if seq > fork_seq:
            yield Record(seq, kind_name(kind), bytes(body), "", "")
