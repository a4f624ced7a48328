"""Workers' liveness locks on PostgreSQL: a session-level advisory lock per owner.

A worker takes its owner's lock on a connection of its own and keeps that connection for as
long as it lives; PostgreSQL drops a session's advisory locks when the session ends, which a
process's death ends (at once for a closed socket; for a host cut off, once the server's
TCP keepalives give up on it, set below to about half a minute). The ``owners`` table lists
the owners that took a lock, so that a free lock means a dead owner and not one that never
took a lock (a worker of an older version: its claims keep the lease as their bound).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Collection
from contextlib import AbstractAsyncContextManager

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from tether.errors import StoreUnavailable

__all__ = ("OwnerSessions",)

Conn = psycopg.AsyncConnection[TupleRow]
_KEEPALIVE = ("tcp_keepalives_idle", "10"), ("tcp_keepalives_interval", "5")


class OwnerSessions:
    """The liveness locks of one schema's workers: held on dedicated sessions, probed on
    ``connection()`` (the store's pool)."""

    def __init__(
        self,
        conninfo: str,
        schema: str,
        connection: Callable[[], AbstractAsyncContextManager[Conn]],
    ) -> None:
        self._conninfo = conninfo
        self._schema = schema
        self._connection = connection
        self._held: dict[str, Conn] = {}

    def key(self, owner_id: str) -> int:
        """The advisory lock key (database-wide, so the schema is part of it)."""
        digest = hashlib.blake2b(
            f"tether-owner\0{self._schema}\0{owner_id}".encode(), digest_size=8
        ).digest()
        return int.from_bytes(digest, "big", signed=True)

    async def hold(self, owner_id: str) -> None:
        if owner_id in self._held:
            return
        try:
            session = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"postgresql: {exc}") from exc
        try:
            for name, value in _KEEPALIVE:
                await session.execute(
                    sql.SQL("SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
                )
            await session.execute(
                sql.SQL("SET search_path TO {}").format(sql.Identifier(self._schema))
            )
            row = await (
                await session.execute("SELECT pg_try_advisory_lock(%s)", (self.key(owner_id),))
            ).fetchone()
            if row is None or not row[0]:
                raise StoreUnavailable(
                    f"owner id {owner_id!r} is in use by a live process on this store"
                )
            await session.execute(
                "INSERT INTO owners (id, started_at) VALUES (%s, now()) "
                "ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at",
                (owner_id,),
            )
        except BaseException as exc:
            await session.close()
            if isinstance(exc, psycopg.Error):
                raise StoreUnavailable(f"postgresql: {exc}") from exc
            raise
        self._held[owner_id] = session
        with contextlib.suppress(StoreUnavailable):  # tidying only: the lock is held
            await self._sweep()

    async def _sweep(self) -> None:
        """Forget the dead owners that hold no claim: workers that died while idle leave
        their row behind, and nobody else would ever look at it again."""
        async with self._connection() as conn:
            rows = await (
                await conn.execute(
                    "SELECT id FROM owners o WHERE NOT EXISTS (SELECT 1 FROM submissions "
                    "WHERE status = 'running' AND owner_id = o.id)"
                )
            ).fetchall()
        for (owner_id,) in rows:
            await self.forget(owner_id)

    async def release(self, owner_id: str) -> None:
        session = self._held.pop(owner_id, None)
        if session is None:
            return
        try:
            await session.execute("DELETE FROM owners WHERE id = %s", (owner_id,))
            await session.execute("DELETE FROM workers WHERE owner_id = %s", (owner_id,))
        except psycopg.Error:
            pass  # the lock goes with the session; a peer forgets the row once it finds it free
        finally:
            await session.close()

    async def release_all(self) -> None:
        for owner_id in list(self._held):
            await self.release(owner_id)

    async def dead(self, owner_ids: Collection[str]) -> set[str]:
        candidates = [owner for owner in owner_ids if owner not in self._held]
        if not candidates:
            return set()
        dead: set[str] = set()
        async with self._connection() as conn:
            rows = await (
                await conn.execute("SELECT id FROM owners WHERE id = ANY(%s)", (candidates,))
            ).fetchall()
            for (owner_id,) in rows:
                if await self._try_lock(conn, owner_id):
                    await self._unlock(conn, owner_id)
                    dead.add(owner_id)
        return dead

    async def forget(self, owner_id: str) -> None:
        if owner_id in self._held:
            return
        async with self._connection() as conn:
            if not await self._try_lock(conn, owner_id):
                return  # held again: alive
            try:
                # What it served goes with it (``VersionStore``), in the same transaction.
                async with conn.transaction():
                    await conn.execute("DELETE FROM owners WHERE id = %s", (owner_id,))
                    await conn.execute("DELETE FROM workers WHERE owner_id = %s", (owner_id,))
            finally:
                await self._unlock(conn, owner_id)

    async def _try_lock(self, conn: Conn, owner_id: str) -> bool:
        """Take ``owner_id``'s lock on ``conn`` if it is free (its holder is gone)."""
        row = await (
            await conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key(owner_id),))
        ).fetchone()
        return row is not None and bool(row[0])

    async def _unlock(self, conn: Conn, owner_id: str) -> None:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (self.key(owner_id),))
