"""SQLite specifics of child submissions: the v9 migration (a parent link, a depth and a
wait's deadline on every submission), and the wake of a parent kept off the settlement of a
root submission."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tether.store import WAIT_FOR_CHILDREN, SqliteStore, SubmissionStatus, TaskParent
from tether.store import _sqlite as sqlite_module
from tether.store import _sqlite_schema as sqlite_schema
from tether.store._sqlite_kinds import kind_code
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.testing.storetest import Fixtures


def _schema(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    return [*rows, ("user_version", str(version))]


async def test_a_version_8_file_migrates_to_the_fresh_schema(tmp_path: Path) -> None:
    """A v8 file's submissions read as root submissions without a deadline, and take
    children afterwards; the file ends with exactly the schema of a fresh one."""
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        fx = Fixtures(store)
        waiting = await fx.claim(await fx.admit("waiting"))
        await store.park(waiting.id, attempt_id=str(waiting.attempt_id), reason="approval")
        queued = await fx.admit("queued")
    old.mkdir()
    with sqlite3.connect(old / "tether.db") as conn:
        conn.create_function("tether_unhex", 1, bytes.fromhex)
        conn.create_function("tether_kind_code", 1, kind_code)
        for step in _MIGRATIONS[:8]:
            conn.executescript(step)
        conn.execute("PRAGMA user_version = 8")
        conn.execute("ATTACH DATABASE ? AS written", (str(written / "tether.db"),))
        for table in ("records", "attempts"):
            conn.execute(f"INSERT INTO {table} SELECT * FROM written.{table}")
        for table in ("conversations", "submissions"):  # the v8 columns only: later steps
            columns = ", ".join(  # added theirs at the end
                row[1] for row in conn.execute(f"PRAGMA table_info({table})").fetchall()
            )
            conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM written.{table}")
        conn.commit()
        conn.execute("DETACH DATABASE written")
    conn.close()
    async with await SqliteStore.open(old) as store:
        fx = Fixtures(store)
        before = await store.get_submission(waiting.id)
        assert before.status is SubmissionStatus.WAITING and before.wait_reason == "approval"
        for submission in (before, await store.get_submission(queued.id)):
            assert (submission.parent_submission_id, submission.parent_call_id) == (None, None)
            assert (submission.depth, submission.wait_until) == (0, None)
        assert await store.list_children(waiting.id) == []
        assert await store.list_expired_waits(fx.at(10_000)) == []
        parent = TaskParent(queued.id, queued.conversation_id, 1, "call-1")
        new = replace(fx.new("child", parent=parent), id="sub-child", conversation_id="conv-child")
        child = (await store.admit(new)).submission
        assert [c.id for c in await store.list_children(queued.id)] == [child.id]
        assert child.depth == 1
    async with await SqliteStore.open(fresh):
        pass
    assert _schema(old / "tether.db") == _schema(fresh / "tether.db")
    assert _schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.fixture
async def traced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[SqliteStore, list[str]]]:
    """A store, and every statement its connections run from now on."""
    statements: list[str] = []
    connect = sqlite_schema.connect

    def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite_module, "connect", tracing)
    async with await SqliteStore.open(tmp_path, inline_commits=True) as store:
        yield store, statements


def _wakes(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith("UPDATE") and "NOT EXISTS" in s]


async def test_only_a_child_settlement_runs_the_wake(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    """The settlement of a root submission (the hot path) runs the statements it ran
    before subagents: the wake of a parent is only for a submission that has one."""
    store, statements = traced
    fx = Fixtures(store)
    root = await fx.claim(await fx.admit("root"))
    child = await fx.claim(
        await fx.admit("child", parent=TaskParent(root.id, root.conversation_id, 1, "c"))
    )
    parked = await store.park(root.id, attempt_id=str(root.attempt_id), reason=WAIT_FOR_CHILDREN)
    assert parked.status is SubmissionStatus.WAITING
    other = await fx.claim(await fx.admit("other"))
    for settling in (other, child):
        statements.clear()
        await store.reserve_settlement(
            settling.id, attempt_id=str(settling.attempt_id), settlement={}
        )
        await store.finalize_settlement(settling.id, now=fx.at(1))
        assert len(_wakes(statements)) == (settling is child)
    assert (await store.get_submission(root.id)).status is SubmissionStatus.QUEUED
