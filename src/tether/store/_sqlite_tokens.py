"""The SQL of API tokens (``TokenStore``) on SQLite: one row per token, found by the unique
index on its digest, as plain functions over a connection (writes on the writer's, inside
its transaction)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from tether.errors import TokenExists, TokenNotFound
from tether.store._common import from_micros, to_micros
from tether.store._tokens import TOKEN_COLUMNS, TokenRow, token_of, token_values

__all__ = ("find_token", "list_tokens", "put_token", "revoke_token")

_COLUMNS = TOKEN_COLUMNS


def _row(row: tuple[Any, ...]) -> TokenRow:
    return token_of(row, from_micros)


def put_token(conn: sqlite3.Connection, row: TokenRow) -> TokenRow:
    inserted = conn.execute(
        f"INSERT INTO tokens ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL) "
        "ON CONFLICT DO NOTHING",
        token_values(row, to_micros),
    ).rowcount
    if not inserted:
        taken = conn.execute("SELECT 1 FROM tokens WHERE id = ?", (row.id,)).fetchone()
        raise TokenExists(row.id, taken="id" if taken is not None else "digest")
    return row


def find_token(conn: sqlite3.Connection, digest: str) -> TokenRow | None:
    found = conn.execute(f"SELECT {_COLUMNS} FROM tokens WHERE digest = ?", (digest,)).fetchone()
    return None if found is None else _row(found)


def list_tokens(
    conn: sqlite3.Connection, subject: str | None, tenant: str | None, include_revoked: bool
) -> list[TokenRow]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM tokens WHERE (?1 IS NULL OR subject = ?1) "
        "AND (?2 IS NULL OR tenant = ?2) AND (?3 OR revoked_at IS NULL) ORDER BY id",
        (subject, tenant, include_revoked),
    ).fetchall()
    return [_row(row) for row in rows]


def revoke_token(conn: sqlite3.Connection, token_id: str, now: datetime) -> TokenRow:
    # COALESCE: a second revocation keeps the first one's time.
    found = conn.execute(
        f"UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? RETURNING {_COLUMNS}",
        (to_micros(now), token_id),
    ).fetchone()
    if found is None:
        raise TokenNotFound(token_id)
    return _row(found)
