"""``tether backup`` copies a store a live server is writing to, consistently, and verifies it."""

import asyncio
import sqlite3
import threading
from pathlib import Path

import httpx
from typer.testing import CliRunner

from tether.cli import app
from tether.store import SqliteStore

from ..processes import eventually
from .conftest import ServerProcess

runner = CliRunner()
SESSIONS = 4


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


def _heads(database: Path) -> dict[str, int]:
    with sqlite3.connect(database) as conn:
        heads = dict(conn.execute("SELECT id, head FROM conversations").fetchall())
    conn.close()
    return heads


async def _logs(path: Path) -> dict[str, list[tuple[int, str]]]:
    """Every conversation's records as (seq, hash), each log verified on the way."""
    async with await SqliteStore.open(path) as store:
        logs = {}
        for conversation_id in _heads(store.path):
            await store.verify(conversation_id)
            records = await store.read(conversation_id, limit=100_000)
            logs[conversation_id] = [(r.seq, r.hash) for r in records]
    return logs


def test_a_backup_taken_while_a_server_writes_is_a_verified_prefix(
    server: ServerProcess, tmp_path: Path
) -> None:
    source = Path(server.store.removeprefix("sqlite:///")) / "tether.db"
    stop = threading.Event()
    sent = [0]

    def write() -> None:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            while not stop.is_set():
                for n in range(SESSIONS):
                    body = {"body": f"message {sent[0]}"}
                    client.post(f"/agents/assistant/user-{n}", json=body).raise_for_status()
                    sent[0] += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        # Several turns of every session logged.
        eventually(
            lambda: (writer.is_alive() and sum(_heads(source).values()) >= 200) or None,
            "the server wrote too little",
        )
        before = _heads(source)
        sent_before = sent[0]
        output = cli("backup", str(tmp_path / "copy.db"), "--store", server.store)
        second = tmp_path / "second"
        second.mkdir()
        cli("backup", str(second), "--store", server.store)
        assert sent[0] > sent_before, "the server stopped writing during the backup"
    finally:
        stop.set()
        writer.join(60)
    assert output.count("\n") == 1 and "every chain verified" in output
    assert f"{len(_heads(tmp_path / 'copy.db'))} conversations" in output
    assert not list(tmp_path.glob(".*partial*"))

    source_logs = asyncio.run(_logs(source))
    for copy in (tmp_path / "copy.db", second / "tether.db"):
        copied = asyncio.run(_logs(copy))
        assert set(before) <= set(copied) <= set(source_logs)
        for conversation_id, log in copied.items():
            # Complete up to a point: at least what was there before the backup began, and
            # exactly the source's records up to where the copy ends.
            assert len(log) >= before.get(conversation_id, 0)
            assert log == source_logs[conversation_id][: len(log)]


def test_a_backup_never_overwrites_and_names_what_is_missing(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'data'}"
    output = cli("backup", str(tmp_path / "missing.db"), "--store", store, code=6)
    assert "no store at" in output and not (tmp_path / "data").exists()

    async def create() -> None:
        async with await SqliteStore.open(tmp_path / "data"):
            pass

    asyncio.run(create())
    (tmp_path / "taken.db").write_bytes(b"keep me")
    output = cli("backup", str(tmp_path / "taken.db"), "--store", store, code=1)
    assert "already exists" in output
    assert (tmp_path / "taken.db").read_bytes() == b"keep me"
    assert "0 conversations, 0 records" in cli("backup", str(tmp_path / "b.db"), "--store", store)


def test_a_postgresql_store_is_pointed_to_pg_dump(tmp_path: Path) -> None:
    output = cli(
        "backup", str(tmp_path / "x.db"), "--store", "postgresql://me:s3cret@db/tether", code=1
    )
    assert "pg_dump" in output and "s3cret" not in output
    assert len(output.strip().splitlines()) == 1
