"""``tether backup``: a consistent copy of a live SQLite store, verified before it is kept.

Copying ``tether.db`` with ``cp`` while a server runs is not a backup: the newest commits live
in ``tether.db-wal`` until a checkpoint moves them into the file, and a copy made between
the two is torn or stale. SQLite's online backup API copies every page under one read
transaction instead: a snapshot as of one commit, taken while writers go on (in WAL mode a
reader never blocks them). The copy is written beside its destination, checked (SQLite's
``quick_check``, then every conversation's hash chain and anchor), and only then renamed
into place.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from pathlib import Path

import typer

from tether.cli._exit import ExitCode, fail, one_line
from tether.cli._serve import DEFAULT_STORE_URL

__all__ = ("backup",)

_BUSY_SECONDS = 30.0
DEST = typer.Argument(help="Where to write the copy: a new file, or a directory to hold tether.db.")
STORE = typer.Option(DEFAULT_STORE_URL, "--store", help="The SQLite store to copy (sqlite:///dir).")


def backup(dest: Path = DEST, store: str = STORE) -> None:
    """Copy a SQLite store consistently, even while a server writes to it, and verify the copy.

    Restore by pointing --store at the copy (or by putting it in place while no server runs).
    """
    source = _sqlite_source(store)
    target = _target(dest)
    partial = target.with_name(f".{target.name}.partial")
    try:
        _copy(source, partial)
        conversations, records = _verified(partial)
        _fsync(partial)
        partial.replace(target)
        _fsync(target.parent)  # the rename itself
    except BaseException:
        _remove(partial)
        raise
    typer.echo(
        f"backed up {source} to {target}: {conversations} conversations, {records} records, "
        "every chain verified"
    )


def _sqlite_source(url: str) -> Path:
    from tether._urls import redact_url

    scheme, _, rest = url.partition("://")
    if scheme in ("postgresql", "postgres"):
        fail(
            f"tether backup copies SQLite stores; back up {redact_url(url)} with pg_dump "
            "(e.g. pg_dump --schema=tether DBNAME > tether.sql)",
            ExitCode.FAILED,
        )
    if scheme != "sqlite" or not rest.startswith("/") or rest == "/":
        fail(
            f"tether backup copies a SQLite store (sqlite:///path), not {redact_url(url)}",
            ExitCode.FAILED,
        )
    from tether.store import SQLITE_FILENAME

    given = Path(rest[1:].partition("?")[0])
    database = given / SQLITE_FILENAME if given.is_dir() else given
    if not database.is_file():
        fail(f"no store at {given} ({database} does not exist)", ExitCode.NO_STORE)
    return database


def _target(dest: Path) -> Path:
    from tether.store import SQLITE_FILENAME

    target = dest / SQLITE_FILENAME if dest.is_dir() else dest
    if target.exists():
        fail(f"{target} already exists: tether backup never overwrites", ExitCode.FAILED)
    if not target.parent.is_dir():
        fail(f"no directory {target.parent} to write {target.name} in", ExitCode.FAILED)
    return target


def _copy(source: Path, partial: Path) -> None:
    _remove(partial)  # a leftover of an interrupted run
    try:
        with contextlib.closing(sqlite3.connect(source, timeout=_BUSY_SECONDS)) as src:
            src.execute("PRAGMA query_only=ON")
            with contextlib.closing(sqlite3.connect(partial)) as dst:
                # All pages in one step: one read transaction, so one commit's snapshot (a
                # stepwise copy restarts whenever another process writes, and may never end).
                src.backup(dst, pages=-1)
    except sqlite3.Error as exc:
        fail(f"cannot copy {source}: {one_line(exc)}", ExitCode.STORE_UNAVAILABLE)


def _verified(copy: Path) -> tuple[int, int]:
    """Check the copy page by page, then every conversation's chain; ``(conversations,
    records)``."""
    with contextlib.closing(sqlite3.connect(copy)) as conn:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    if problems != ["ok"]:
        fail(f"the copy is damaged: {one_line('; '.join(problems[:3]))}", ExitCode.FAILED)
    return asyncio.run(_verify_chains(copy))


async def _verify_chains(copy: Path) -> tuple[int, int]:
    from tether.errors import LogTampered, TetherError
    from tether.store import SqliteStore

    try:
        # Opening migrates a copy of an older schema, as the store itself would on restart.
        async with await SqliteStore.open(copy) as store:
            with contextlib.closing(sqlite3.connect(copy)) as conn:
                ids = [row[0] for row in conn.execute("SELECT id FROM conversations ORDER BY id")]
            records = 0
            for conversation_id in ids:
                records += await store.verify(conversation_id)
    except LogTampered as exc:
        fail(f"the copy does not verify: {one_line(exc)}", ExitCode.FAILED)
    except TetherError as exc:
        fail(f"cannot open the copy: {one_line(exc)}", ExitCode.STORE_UNAVAILABLE)
    return len(ids), records


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
