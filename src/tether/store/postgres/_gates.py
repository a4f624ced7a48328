"""The PostgreSQL store's gate index: kept in the transaction of every checked append.

Appends that change a gate take the checked path (``_log.append``, under the conversation's
row lock), which calls :func:`index_gates` with the records it sealed; the one-statement
path declines them. The v5 migration calls :func:`backfill` once, the same code over the logs
(after the last step, so on the schema this code writes: v8's kinds included).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from datetime import datetime

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether._payloads import ConversationParent
from tether.records import Record
from tether.store._common import check_limit
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

__all__ = ("backfill", "index_gates", "list_gates")

Conn = AsyncConnection[TupleRow]


def _same(moment: datetime) -> datetime:
    return moment  # timestamptz columns take and give aware datetimes


async def index_gates(conn: Conn, conversation_id: str, records: Sequence[Record]) -> None:
    """Apply what ``records``, just inserted into ``conversation_id``'s log, do to its gates,
    in the caller's transaction."""
    if not has_gate_changes(records):
        return
    for statement, params in gate_statements(
        conversation_id,
        gate_changes(records),
        placeholder="%s",
        moment=_same,
        same="IS NOT DISTINCT FROM",
    ):
        await conn.execute(statement, params)


async def list_gates(
    conn: Conn,
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
    filters = {"agent": agent, "instance": instance, "tool": tool, "tenant": tenant}
    if any(value is not None and "\x00" in value for value in filters.values()):
        return []  # no text column holds a NUL: nothing matches (and libpq cannot send it)

    async def page(one: GateStatus, sort: GateKind) -> list[Gate]:
        query, params = gate_query(one, sort, filters, start, limit, "%s")
        rows = await (await conn.execute(query, params)).fetchall()
        return [gate_from_row(row, _same) for row in rows]

    pages = index_pages(status, kind)
    if len(pages) == 1:
        return await page(*pages[0])
    async with conn.transaction():  # one snapshot for every page
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        return merge_pages([await page(one, sort) for one, sort in pages], limit)


async def backfill(conn: Conn) -> None:
    """Index the gates of every log written before the index existed (the v5 migration):
    each conversation's own records that may change a gate, in seq order, through the code
    every append runs. A fork's copied records are its parent's: skipped."""
    forks = {
        cid: ConversationParent.model_validate_json(bytes(parent)).seq
        for cid, parent in await (
            await conn.execute("SELECT id, parent FROM conversations WHERE parent IS NOT NULL")
        ).fetchall()
    }
    async with conn.cursor(name="tether_gates_backfill") as cursor:
        await cursor.execute(
            "SELECT conversation_id, seq, kind, body FROM records "
            "WHERE kind IN ('approval_requested', 'approval_decided', 'input_requested', "
            "'input_answered') "
            "OR (kind = 'tool_outcome' AND position(%s::bytea IN body) > 0) "
            "ORDER BY conversation_id, seq",
            (DENIED_MARK,),
        )
        rows = [row async for row in cursor]
    for cid, group in itertools.groupby(rows, key=lambda row: str(row[0])):
        await index_gates(conn, cid, list(_records(group, forks.get(cid, 0))))


def _records(rows: Iterator[tuple[str, int, str, bytes]], fork_seq: int) -> Iterator[Record]:
    for _, seq, kind, body in rows:
        if seq > fork_seq:
            yield Record(int(seq), kind, bytes(body), "", "")
