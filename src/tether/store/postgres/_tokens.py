"""The SQL of API tokens (``TokenStore``) on PostgreSQL: one row per token, found by the
unique index on its digest; each operation one statement (or a check after a refused
insert)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tether.errors import TokenExists, TokenNotFound
from tether.store._tokens import TOKEN_COLUMNS, TokenRow, stored_time, token_of, token_values
from tether.store.postgres._log import Conn

__all__ = ("find_token", "list_tokens", "put_token", "revoke_token")

_COLUMNS = TOKEN_COLUMNS


def _row(row: tuple[Any, ...]) -> TokenRow:
    return token_of(row, stored_time)


async def put_token(conn: Conn, row: TokenRow) -> TokenRow:
    inserted = (
        await conn.execute(
            f"INSERT INTO tokens ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, NULL) "
            "ON CONFLICT DO NOTHING",
            token_values(row, lambda moment: moment),
        )
    ).rowcount
    if not inserted:
        taken = await (
            await conn.execute("SELECT 1 FROM tokens WHERE id = %s", (row.id,))
        ).fetchone()
        raise TokenExists(row.id, taken="id" if taken is not None else "digest")
    return row


async def find_token(conn: Conn, digest: str) -> TokenRow | None:
    found = await (
        await conn.execute(f"SELECT {_COLUMNS} FROM tokens WHERE digest = %s", (digest,))
    ).fetchone()
    return None if found is None else _row(found)


async def list_tokens(
    conn: Conn, subject: str | None, tenant: str | None, include_revoked: bool
) -> list[TokenRow]:
    rows = await (
        await conn.execute(
            f"SELECT {_COLUMNS} FROM tokens "
            "WHERE (%(subject)s::text IS NULL OR subject = %(subject)s) "
            "AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s) "
            'AND (%(all)s OR revoked_at IS NULL) ORDER BY id COLLATE "C"',
            {"subject": subject, "tenant": tenant, "all": include_revoked},
        )
    ).fetchall()
    return [_row(row) for row in rows]


async def revoke_token(conn: Conn, token_id: str, now: datetime) -> TokenRow:
    # COALESCE: a second revocation keeps the first one's time.
    found = await (
        await conn.execute(
            "UPDATE tokens SET revoked_at = COALESCE(revoked_at, %s) WHERE id = %s "
            f"RETURNING {_COLUMNS}",
            (now, token_id),
        )
    ).fetchone()
    if found is None:
        raise TokenNotFound(token_id)
    return _row(found)
