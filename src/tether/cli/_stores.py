"""Opening ``--store`` for a command: one line and its own exit code for each way it fails, and
never a new store for a command that only reads one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tether._urls import redact_url
from tether.cli._exit import ExitCode, fail
from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.store import Store

__all__ = ("DEFAULT_STORE_URL", "open_store_or_fail")

DEFAULT_STORE_URL = "sqlite:///./tether-data"
"""``tether.store.DEFAULT_STORE_URL``, without importing the stores (a test holds them equal)."""


async def open_store_or_fail(url: str, *, create: bool) -> Store:
    """The store ``url`` names, opened; with ``create=False`` only one that already exists.

    Exits with :attr:`ExitCode.NO_STORE` (naming the path) when ``create`` is false and there
    is none, :attr:`ExitCode.BAD_STORE_URL` when ``url`` is not a store URL, and
    :attr:`ExitCode.STORE_UNAVAILABLE` when the store cannot be opened.
    """
    from tether.store import open_store

    shown = redact_url(url)
    if not create:
        await _require_existing(url)
    try:
        return await open_store(url)
    except ValueError as exc:
        fail(redact_url(str(exc)), ExitCode.BAD_STORE_URL)
    except (TetherError, OSError) as exc:
        fail(f"cannot open the store {shown}: {redact_url(str(exc))}", ExitCode.STORE_UNAVAILABLE)


async def _require_existing(url: str) -> None:
    scheme, _, rest = url.partition("://")
    if scheme == "sqlite" and rest.startswith("/") and rest != "/":
        _require_sqlite_file(rest[1:].partition("?")[0])
    elif scheme in ("postgresql", "postgres"):
        await _require_postgres_schema(url)


def _require_sqlite_file(path: str) -> None:
    from tether.store import SQLITE_FILENAME

    given = Path(path)
    database = given / SQLITE_FILENAME if given.is_dir() else given
    if not database.is_file():
        missing = f"no {SQLITE_FILENAME} in it" if given.is_dir() else "it does not exist"
        fail(
            f"no store at {path}: {missing} (a reading command never creates one; "
            "--store sqlite:///path names the store)",
            ExitCode.NO_STORE,
        )


async def _require_postgres_schema(url: str) -> None:
    try:
        import psycopg

        from tether.store.postgres import split_store_url
    except ImportError:
        return  # open_store names the missing extra
    conninfo, options = split_store_url(url)
    schema = options.get("schema", "tether")
    try:
        async with await psycopg.AsyncConnection.connect(conninfo) as conn:
            found = await (
                await conn.execute(
                    "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'tether_schema'",
                    (schema,),
                )
            ).fetchone()
    except psycopg.Error as exc:
        fail(
            f"cannot open the store {redact_url(url)}: {redact_url(str(exc))}",
            ExitCode.STORE_UNAVAILABLE,
        )
    if found is None:
        fail(
            f"no store at {redact_url(url)} (no schema {schema!r} in that database); a reading "
            "command never creates one",
            ExitCode.NO_STORE,
        )
