"""SQLite specifics beyond the conformance suite: files, schema, errors, processes, group commit."""

import asyncio
import contextlib
import gc
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tether._ids import new_ulid
from tether.engine import Runtime
from tether.errors import (
    Conflict,
    Fenced,
    LogTampered,
    StoreUnavailable,
    SubmissionNotFound,
    UnsupportedSchema,
)
from tether.records import PAYLOAD_TYPES, RecordDraft, UserMessage
from tether.store import MemoryStore, SessionKey, SqliteStore, open_store
from tether.store._sqlite_append import Appender
from tether.store._sqlite_kinds import KIND_CODES, kind_code, kind_name
from tether.store._sqlite_schema import (
    _MIGRATIONS,
    _SCHEMA_V1,
    PAGE_SIZE,
    SCHEMA_VERSION,
    WAL_AUTOCHECKPOINT_PAGES,
)
from tether.testing.storetest import Fixtures

from ..engine.agents import echo_agent
from ..engine.conftest import FAST
from ..kill import killed_repeatedly
from ..processes import start

KEY = SessionKey("support", "acme")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def quick_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests of the inline choice itself: on a slow disk (commits averaging past the
    limit, as on a loaded CI machine) every batch would go to the writer thread."""
    monkeypatch.setattr("tether.store._sqlite_writer.INLINE_COMMIT_LIMIT", float("inf"))


async def _conversation(store: SqliteStore | MemoryStore, session: str = "default") -> str:
    conversation, _ = await store.ensure_conversation(
        SessionKey("support", "acme", session), conversation_id=f"conv-{session}", created_at=NOW
    )
    return conversation.id


def _draft(text: str = "x") -> RecordDraft:
    return RecordDraft(UserMessage(body=text))


@contextlib.contextmanager
def _write_locked(path: Path) -> Iterator[None]:
    """Another process's write transaction holds the file's write lock meanwhile."""
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


async def test_a_directory_means_tether_db(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "data") as store:
        assert store.path == tmp_path / "data" / "tether.db"
    async with await SqliteStore.open(tmp_path / "file.db") as store:
        assert store.path == tmp_path / "file.db"
    assert (tmp_path / "data" / "tether.db").exists() and (tmp_path / "file.db").exists()


async def test_data_persists_across_reopen(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path) as store:
        cid = await _conversation(store)
        await store.append(cid, [_draft(str(n)) for n in range(4)], expected_seq=1, fence=0)
        before = await store.read(cid)
    async with await SqliteStore.open(tmp_path) as store:
        assert await store.head(cid) == 5
        assert await store.read(cid) == before
        assert await store.verify(cid) == 5


async def test_a_store_opened_again_runs_no_migration_again(tmp_path: Path) -> None:
    """The stamped version is the number of steps: one stamped short of them re-ran the last
    on every open ("table limit_holds already exists", when two merged migrations took one
    number)."""
    assert len(_MIGRATIONS) == SCHEMA_VERSION
    for _ in range(2):
        async with await SqliteStore.open(tmp_path):
            pass
    with sqlite3.connect(tmp_path / "tether.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path):
        pass
    with sqlite3.connect(tmp_path / "tether.db") as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(UnsupportedSchema) as caught:
        await SqliteStore.open(tmp_path)
    assert (caught.value.found, caught.value.supported) == (99, SCHEMA_VERSION)


def _schema(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    return [*rows, ("user_version", str(version))]


async def test_a_version_1_file_migrates_to_the_fresh_schema(tmp_path: Path) -> None:
    """A v1 file (hex hashes, no trace column) keeps its log and submissions through every
    migration, and ends with exactly the schema of a fresh file."""
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        cid = await _conversation(store)
        fence = await store.mint_fence(cid)
        await store.append(cid, [RecordDraft(UserMessage(body="hi"))], expected_seq=1, fence=fence)
        records = await store.read(cid)
    old.mkdir()
    with sqlite3.connect(old / "tether.db") as conn:
        conn.executescript(_SCHEMA_V1)
        conn.execute("PRAGMA user_version = 1")
        source = sqlite3.connect(written / "tether.db")
        conn.executemany(
            "INSERT INTO conversations (id, agent, instance, session, created_at, parent, fence) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            source.execute(
                "SELECT id, agent, instance, session, created_at, parent, fence FROM conversations"
            ).fetchall(),
        )
        source.close()
        conn.executemany(  # as v1 stored them: hashes in hex
            "INSERT INTO records (conversation_id, seq, kind, body, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(cid, r.seq, r.kind, r.canonical, r.prev_hash, r.hash) for r in records],
        )
        conn.execute(
            "INSERT INTO submissions (id, agent, instance, session, dispatch_id, conversation_id, "
            "status, input, created_at) VALUES ('s', 'a', 'i', 'default', 's', 'c', 'queued', "
            "'{}', 0)"
        )
    conn.close()
    async with await SqliteStore.open(old) as store:
        submission = await store.get_submission("s")
        assert submission.trace is None and submission.input == {}
        assert [(r.seq, r.hash) for r in await store.read(cid)] == [
            (r.seq, r.hash) for r in records
        ]
        assert await store.verify(cid) == len(records)
    async with await SqliteStore.open(fresh):
        pass
    assert _schema(old / "tether.db") == _schema(fresh / "tether.db")


async def test_a_corrupt_file_raises_store_unavailable(tmp_path: Path) -> None:
    (tmp_path / "tether.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreUnavailable):
        await SqliteStore.open(tmp_path)


async def test_a_locked_database_raises_store_unavailable_then_recovers(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path, busy_timeout=0.2) as store:
        cid = await _conversation(store)
        with _write_locked(tmp_path / "tether.db"), pytest.raises(StoreUnavailable):
            await store.append(cid, [_draft()], expected_seq=1, fence=0)
        assert [r.seq for r in await store.append(cid, [_draft()], expected_seq=1, fence=0)] == [2]


async def test_appends_from_many_conversations_share_commits(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path) as store:
        conversations = [await _conversation(store, f"s{n}") for n in range(64)]
        commits_before = store.commits
        results = await asyncio.gather(
            *(store.append(cid, [_draft()], expected_seq=1, fence=0) for cid in conversations),
            store.append(conversations[0], [_draft()], expected_seq=7, fence=0),  # fails alone
            return_exceptions=True,
        )
        assert isinstance(results[-1], Conflict)
        assert all(not isinstance(r, BaseException) for r in results[:-1])
        assert store.commits - commits_before < 64
        for cid in conversations:
            assert await store.head(cid) == 2


@pytest.mark.usefixtures("quick_disk")
async def test_inline_commits_run_on_the_callers_thread_when_the_writer_is_idle(
    tmp_path: Path,
) -> None:
    async with await SqliteStore.open(tmp_path, inline_commits=True) as store:
        cid = await _conversation(store)
        committed_on: list[str] = []
        store._writer._on_commit = lambda ids: committed_on.append(threading.current_thread().name)
        await store.append(cid, [_draft()], expected_seq=1, fence=0)
        assert committed_on == [threading.current_thread().name]
        assert await store.head(cid) == 2


async def test_a_task_that_only_commits_still_lets_others_run(tmp_path: Path) -> None:
    """Every write waits at least one loop iteration for its commit, inline or not."""
    async with await SqliteStore.open(tmp_path, inline_commits=True) as store:
        cid = await _conversation(store)
        ticks = 0

        async def ticking() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        async with asyncio.TaskGroup() as group:
            ticker = group.create_task(ticking())
            await asyncio.sleep(0)  # the ticker ticks once before the writes begin
            for seq in range(1, 21):
                await store.append(cid, [_draft()], expected_seq=seq, fence=0)
            assert ticks >= 20
            ticker.cancel()


@pytest.mark.usefixtures("quick_disk")
async def test_a_caller_cancelled_once_its_write_is_gathered_leaves_the_commit_and_no_error(
    tmp_path: Path,
) -> None:
    async with await SqliteStore.open(tmp_path, inline_commits=True) as store:
        cid = await _conversation(store)
        loop = asyncio.get_running_loop()
        unhandled: list[dict[str, object]] = []
        loop.set_exception_handler(lambda _, context: unhandled.append(context))
        for expected in (1, 99):  # a commit, then an append refused (Conflict)
            append = asyncio.ensure_future(
                store.append(cid, [_draft()], expected_seq=expected, fence=0)
            )
            await asyncio.sleep(0)  # the append is gathered and its commit due
            append.cancel()
            with pytest.raises(asyncio.CancelledError):
                await append
        del append
        await asyncio.sleep(0)  # the loop lets go of the cancelled task
        gc.collect()
        # Committed on the loop or, the cancellation being due too, on the thread: in order,
        # so a later append follows it.
        [after] = await store.append(cid, [_draft()], expected_seq=2, fence=0)
        assert unhandled == [] and after.seq == 3


async def test_an_inline_commit_never_waits_for_another_process_on_the_loop(
    tmp_path: Path,
) -> None:
    async with await SqliteStore.open(tmp_path, inline_commits=True) as store:
        cid = await _conversation(store)
        with _write_locked(tmp_path / "tether.db"):
            append = asyncio.ensure_future(store.append(cid, [_draft()], expected_seq=1, fence=0))
            await asyncio.sleep(0.01)  # the point: the loop runs on while the lock is held
            # Waited for inline, the append would have failed by now (busy, after 5 s).
            assert not append.done()
        assert [r.seq for r in await append] == [2]  # the thread waited for the lock
        # ... with a busy timeout of its own: the connection idles at none, for inline commits
        assert store._writer._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 0
        assert [r.seq for r in await store.append(cid, [_draft()], expected_seq=2, fence=0)] == [3]


@pytest.mark.usefixtures("quick_disk")
async def test_the_writes_of_one_loop_iteration_commit_together_on_the_loop(
    tmp_path: Path,
) -> None:
    async with await SqliteStore.open(tmp_path) as store:  # inline commits by default
        conversations = [await _conversation(store, f"s{n}") for n in range(64)]
        committed_on: list[str] = []
        store._writer._on_commit = lambda ids: committed_on.append(threading.current_thread().name)
        commits_before = store.commits
        await asyncio.gather(
            *(store.append(cid, [_draft()], expected_seq=1, fence=0) for cid in conversations)
        )
        assert store.commits - commits_before == 1
        assert committed_on == [threading.current_thread().name]


async def test_slow_commits_go_to_the_writer_thread_until_commits_are_quick_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow disk would stall the loop for every fsync: its batches commit on the thread."""
    async with await SqliteStore.open(tmp_path) as store:
        cid = await _conversation(store)
        committed_on: list[str] = []
        store._writer._on_commit = lambda ids: committed_on.append(threading.current_thread().name)
        monkeypatch.setattr("tether.store._sqlite_writer.INLINE_COMMIT_LIMIT", 0.0)
        await store.append(cid, [_draft()], expected_seq=1, fence=0)
        assert committed_on == [store._writer._thread.name]
        monkeypatch.setattr("tether.store._sqlite_writer.INLINE_COMMIT_LIMIT", 60.0)
        await store.append(cid, [_draft()], expected_seq=2, fence=0)
        assert committed_on[-1] == threading.current_thread().name
        assert await store.verify(cid) == 3


@pytest.mark.usefixtures("quick_disk")
async def test_a_batch_goes_to_the_writer_thread_while_other_callbacks_are_due(
    tmp_path: Path,
) -> None:
    """On a busy loop the fsync overlaps the loop's work instead of holding it up."""
    async with await SqliteStore.open(tmp_path) as store:
        cid = await _conversation(store)
        committed_on: list[str] = []
        store._writer._on_commit = lambda ids: committed_on.append(threading.current_thread().name)
        append = asyncio.ensure_future(store.append(cid, [_draft()], expected_seq=1, fence=0))
        await asyncio.sleep(0)  # the append is gathered; its commit is due next
        asyncio.get_running_loop().call_soon(lambda: None)  # and so is other work
        assert [r.seq for r in await append] == [2]
        assert committed_on == [store._writer._thread.name]


@pytest.mark.usefixtures("quick_disk")
async def test_closing_commits_the_writes_gathered_but_not_yet_committed(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path)
    cid = await _conversation(store)
    append = asyncio.ensure_future(store.append(cid, [_draft()], expected_seq=1, fence=0))
    await asyncio.sleep(0)  # the append is gathered; its commit would run next iteration
    assert not append.done()
    await store.close()
    assert [r.seq for r in await append] == [2]
    async with await SqliteStore.open(tmp_path) as reopened:
        assert await reopened.verify(cid) == 2


class _Interrupt(BaseException):
    """What no operation's savepoint catches (as ``KeyboardInterrupt`` would not be)."""


def _interrupted(conn: sqlite3.Connection, touched: list[str]) -> None:
    raise _Interrupt


@contextlib.asynccontextmanager
async def _writer_held(store: SqliteStore) -> AsyncIterator[None]:
    """The writer thread is busy meanwhile, so every write queued then is one batch."""
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection, touched: list[str]) -> None:
        entered.set()
        release.wait(10)

    held = asyncio.ensure_future(store._writer.submit(hold))
    assert await asyncio.to_thread(entered.wait, 10)
    try:
        yield
    finally:
        release.set()
        await held


@pytest.mark.usefixtures("quick_disk")
@pytest.mark.parametrize("commits", ["inline", "thread"])
@pytest.mark.parametrize("failing", ["operation", "appends"])
async def test_a_rolled_back_batch_tells_none_of_its_writers_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commits: str, failing: str
) -> None:
    """One commit rolled back fails every write in it: an admit that came before or after
    the write that broke it must not return as done for a submission that does not exist."""
    async with await SqliteStore.open(tmp_path, inline_commits=commits == "inline") as store:
        fx = Fixtures(store)
        cid = await _conversation(store)
        before = fx.new("before")
        after = fx.new("after")
        if failing == "appends":  # the run of appends breaks after sealing both
            append_all = Appender.append_all

            def breaking(self: Appender, conn: sqlite3.Connection, requests: Any) -> None:
                append_all(self, conn, requests)
                raise MemoryError

            monkeypatch.setattr(Appender, "append_all", breaking)
        held = _writer_held(store) if commits == "thread" else contextlib.nullcontext()
        async with held:
            writes = [
                asyncio.ensure_future(store.admit(before)),
                asyncio.ensure_future(store.append(cid, [_draft()], expected_seq=1, fence=0)),
                asyncio.ensure_future(store.append(cid, [_draft()], expected_seq=2, fence=0)),
                *(
                    [asyncio.ensure_future(store._writer.submit(_interrupted))]
                    if failing == "operation"
                    else []
                ),
                asyncio.ensure_future(store.admit(after)),
            ]
            await asyncio.sleep(0)  # every write is queued in this one iteration
        results = await asyncio.gather(*writes, return_exceptions=True)
        monkeypatch.undo()
        if failing == "operation":
            assert isinstance(results[3], _Interrupt)  # its own error reaches its caller
            del results[3]
        assert [type(result) for result in results] == [StoreUnavailable] * 4
        assert await store.head(cid) == 1
        for new in (before, after):
            with pytest.raises(SubmissionNotFound):
                await store.get_submission(new.id)
        # ... and the store goes on writing
        [record] = await store.append(cid, [_draft()], expected_seq=1, fence=0)
        assert record.seq == 2 and (await store.admit(after)).submission.id == after.id


def _copies(directory: Path, text: str) -> dict[str, int]:
    """How often ``text`` occurs in the raw bytes of each of the store's files."""
    return {
        name: (directory / name).read_bytes().count(text.encode())
        for name in ("tether.db", "tether.db-wal", "tether.db-shm")
    }


@pytest.mark.parametrize("library_default", ["on", "off"])
async def test_an_erased_session_leaves_no_copy_of_its_text_in_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, library_default: str
) -> None:
    """An erase overwrites: nothing of the session's text stays readable in the database
    file, its WAL or its shared memory, though each message went through many pages and
    commits (its submission's row rewritten at claim and settlement, pages shared with a
    session that goes on), and the store is still open. ``secure_delete`` is on by default
    in some builds of SQLite (Debian's) and off in others; an update leaves the row's old
    version in its page unless it is on from the start."""
    if library_default == "off":
        connect = sqlite3.connect

        def connect_as_built_without(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn: sqlite3.Connection = connect(*args, **kwargs)
            conn.execute("PRAGMA secure_delete=OFF")
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect_as_built_without)
    canary = f"canary-{new_ulid()}"
    async with (
        await SqliteStore.open(tmp_path) as store,
        Runtime({"echo": echo_agent()}, store, **FAST) as runtime,
    ):
        for n in range(20):
            for session, text in (("gone", f"{canary} {n}"), ("kept", f"other {n}")):
                receipt = await runtime.dispatch("echo", "acme", text, session=session)
                await runtime.wait(receipt.submission_id)
        assert sum(_copies(tmp_path, canary).values()) > 20
        await runtime.erase_session("echo", "acme", session="gone")
        assert _copies(tmp_path, canary) == {"tether.db": 0, "tether.db-wal": 0, "tether.db-shm": 0}
        kept = await store.find_conversation(SessionKey("echo", "acme", "kept"))
        assert await store.verify(kept.id) == await store.head(kept.id)
        receipt = await runtime.dispatch("echo", "acme", "after", session="kept")
        assert (await runtime.wait(receipt.submission_id))["status"] == "succeeded"


def test_inline_commits_keep_order_while_other_threads_queue(tmp_path: Path) -> None:
    """Loops on several threads share one inline store: each falls back to the writer thread
    while another commits, and no sequential appender ever sees a spurious conflict."""
    store = asyncio.run(SqliteStore.open(tmp_path, inline_commits=True))

    def appender(session: str) -> int:
        async def run() -> int:
            cid = await _conversation(store, session)
            head = 1
            for n in range(150):
                [record] = await store.append(cid, [_draft(str(n))], expected_seq=head, fence=0)
                head = record.seq
            return await store.verify(cid)

        return asyncio.run(run())

    with ThreadPoolExecutor(max_workers=3) as pool:
        verified = list(pool.map(appender, ["a", "b", "c"]))
    assert verified == [151, 151, 151]
    asyncio.run(store.close())


@pytest.mark.parametrize("commits", ["inline", "thread"])
def test_sigkill_mid_append_loses_nothing_acknowledged(tmp_path: Path, commits: str) -> None:
    """A process appending as fast as it can is killed at random moments, three times over;
    every append it acknowledged is in the file, whole and chained, and writing goes on."""
    worker = Path(__file__).with_name("append_worker.py")

    async def setup() -> str:
        async with await SqliteStore.open(tmp_path) as store:
            return await _conversation(store)

    cid = asyncio.run(setup())
    command = [sys.executable, str(worker), str(tmp_path), cid, commits]
    for acknowledged in killed_repeatedly(command, seed=7, acknowledgements=(20, 200)):

        async def check() -> int:
            async with await SqliteStore.open(tmp_path) as store:
                head = await store.head(cid)
                assert await store.verify(cid) == head
                return head

        assert asyncio.run(check()) >= acknowledged


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("memory://", MemoryStore),
        ("sqlite:///{tmp}/d", SqliteStore),
        ("sqlite:///{tmp}/x.db?synchronous=normal", SqliteStore),
        ("sqlite:///{tmp}/y.db?inline_commits=false", SqliteStore),
    ],
)
async def test_open_store_from_url(tmp_path: Path, url: str, expected: type) -> None:
    store = await open_store(url.format(tmp=tmp_path))
    async with store:
        assert isinstance(store, expected)
        if isinstance(store, SqliteStore):
            assert store.synchronous == ("NORMAL" if "normal" in url else "FULL")
            assert store._writer._inline == ("inline_commits=false" not in url)


@pytest.mark.parametrize(
    "url",
    [
        "postgres-ish://x",
        "sqlite://relative",
        "sqlite:///{tmp}/d?bogus=1",
        "sqlite:///{tmp}/d?synchronous=sometimes",
        "sqlite:///{tmp}/d?inline_commits=maybe",
    ],
)
async def test_bad_store_urls_are_value_errors(tmp_path: Path, url: str) -> None:
    with pytest.raises(ValueError):
        await open_store(url.format(tmp=tmp_path))


def test_eight_processes_race_one_append(tmp_path: Path) -> None:
    """Exactly one of 8 OS processes wins ``append(expected_seq=1)``; the rest get typed errors."""
    worker = Path(__file__).with_name("race_worker.py")

    async def setup() -> str:
        async with await SqliteStore.open(tmp_path) as store:
            return await _conversation(store)

    cid = asyncio.run(setup())
    start_at = time.time() + 4.0
    racers = [
        start(
            [sys.executable, str(worker), str(tmp_path), cid, str(start_at), f"racer-{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    outcomes = []
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        outcomes.append(out.strip())
    assert outcomes.count("ok") == 1, outcomes
    assert all(o in ("ok", "Conflict", "Fenced") for o in outcomes), outcomes

    async def check() -> None:
        async with await SqliteStore.open(tmp_path) as store:
            assert await store.head(cid) == 2
            assert await store.verify(cid) == 2

    asyncio.run(check())


async def test_two_stores_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    """The writer's cache of conversation heads and fences never hides another writer's commit."""
    async with await SqliteStore.open(tmp_path) as a, await SqliteStore.open(tmp_path) as b:
        cid = await _conversation(a)
        await a.append(cid, [_draft("a1")], expected_seq=1, fence=0)  # a now caches head 2
        await b.append(cid, [_draft("b1")], expected_seq=2, fence=0)
        with pytest.raises(Conflict):
            await a.append(cid, [_draft("a2")], expected_seq=2, fence=0)
        [record] = await a.append(cid, [_draft("a2")], expected_seq=3, fence=0)
        assert record.prev_hash == (await b.read(cid, after_seq=2))[0].hash
        fence = await b.mint_fence(cid)
        with pytest.raises(Fenced):
            await a.append(cid, [_draft("a3")], expected_seq=4, fence=fence - 1)
        await a.append(cid, [_draft("a3")], expected_seq=4, fence=fence)
        assert await b.verify(cid) == 5


async def test_a_new_file_uses_8_kib_pages_and_keeps_no_prev_hash(tmp_path: Path) -> None:
    """Each record's prev_hash is its predecessor's hash, read beside it, not stored again."""
    async with await SqliteStore.open(tmp_path) as store:
        cid = await _conversation(store)
        await store.append(cid, [_draft("a"), _draft("b")], expected_seq=1, fence=0)
        records = await store.read(cid, after_seq=1)
        assert records[0].prev_hash == (await store.read(cid, limit=1))[0].hash
        assert records[1].prev_hash == records[0].hash
    with sqlite3.connect(tmp_path / "tether.db") as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 8192
        columns = [row[1] for row in conn.execute("PRAGMA table_info(records)")]
        kinds = [row[0] for row in conn.execute("SELECT kind FROM records ORDER BY seq")]
    conn.close()
    assert columns == ["position", "conversation", "seq", "kind", "body", "hash"]
    assert kinds == [
        KIND_CODES.index("conversation_created"),
        *[KIND_CODES.index("user_message")] * 2,
    ]


async def test_the_wal_wraps_early_instead_of_growing(tmp_path: Path) -> None:
    """Commits reuse the WAL's space once it holds WAL_AUTOCHECKPOINT_PAGES pages, so a new
    process's commits soon stop growing the file (each growth costs its fsync a journaled
    size change)."""
    wal = tmp_path / "tether.db-wal"
    frame = PAGE_SIZE + 24
    async with await SqliteStore.open(tmp_path, inline_commits=True) as store:
        cid = await _conversation(store)
        for seq in range(1, 1_201):  # about 4 MiB of frames: well past one wrap
            await store.append(cid, [_draft("x" * 2_000)], expected_seq=seq, fence=0)
        assert wal.stat().st_size <= 32 + frame * (WAL_AUTOCHECKPOINT_PAGES + 16)
        assert await store.head(cid) == 1_201


def test_every_record_kind_has_a_stored_code() -> None:
    """A kind without a code would still be stored (by name), but at a dozen bytes a record."""
    assert set(PAYLOAD_TYPES) <= set(KIND_CODES)
    assert len(set(KIND_CODES)) == len(KIND_CODES)
    assert [kind_name(kind_code(kind)) for kind in KIND_CODES] == list(KIND_CODES)
    assert (
        kind_code("a_kind_of_tomorrow") == kind_name("a_kind_of_tomorrow") == "a_kind_of_tomorrow"
    )


async def test_a_record_without_its_conversation_fails_the_v4_migration(tmp_path: Path) -> None:
    """Records are re-keyed by conversation number: an orphan fails loudly, nothing is lost."""
    with sqlite3.connect(tmp_path / "tether.db") as conn:
        conn.create_function("tether_unhex", 1, bytes.fromhex)
        for step in _MIGRATIONS[:3]:
            conn.executescript(step)
        conn.execute("PRAGMA user_version = 3")
        conn.execute(
            "INSERT INTO records (conversation_id, seq, kind, body, prev_hash, hash) "
            "VALUES ('nowhere', 1, 'user_message', x'7b7d', x'', x'00')"
        )
    conn.close()
    with pytest.raises(StoreUnavailable):
        await SqliteStore.open(tmp_path)
    with sqlite3.connect(tmp_path / "tether.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 1
    conn.close()


async def test_a_version_5_file_gets_its_anchors_from_its_logs(tmp_path: Path) -> None:
    """v6 anchors each log in its conversation row; a v5 file's anchors are backfilled from
    its last records, so its logs verify, and a log cut short afterwards does not."""
    written, old = tmp_path / "written", tmp_path / "old"
    async with await SqliteStore.open(written) as store:
        ids = [await _conversation(store, session) for session in ("a", "b")]
        for head, cid in enumerate(ids, start=1):
            for seq in range(1, head + 2):
                await store.append(cid, [_draft(f"{seq}")], expected_seq=seq, fence=0)
    old.mkdir()
    with sqlite3.connect(old / "tether.db") as conn:
        conn.create_function("tether_unhex", 1, bytes.fromhex)
        conn.create_function("tether_kind_code", 1, kind_code)
        for step in _MIGRATIONS[:5]:
            conn.executescript(step)
        conn.execute("PRAGMA user_version = 5")
        conn.execute("ATTACH DATABASE ? AS written", (str(written / "tether.db"),))
        conn.execute(
            "INSERT INTO conversations (number, id, agent, instance, session, created_at, parent, "
            "fence) SELECT number, id, agent, instance, session, created_at, parent, fence "
            "FROM written.conversations"
        )
        conn.execute("INSERT INTO records SELECT * FROM written.records")
        conn.commit()
        conn.execute("DETACH DATABASE written")
    conn.close()
    async with await SqliteStore.open(old) as store:
        assert [await store.verify(cid) for cid in ids] == [3, 4]
        assert [await store.head(cid) for cid in ids] == [3, 4]
        with sqlite3.connect(store.path) as conn:
            conn.execute("DELETE FROM records WHERE seq = 4")
        conn.close()
        assert await store.verify(ids[0]) == 3
        with pytest.raises(LogTampered, match="log ends at 3, head is 4"):
            await store.verify(ids[1])
