"""The store seen through failpoints (``tether.store.with_failpoints``) on every backend, and
the SQLite writer's own ``sqlite.commit``: an injected failure is what the backend lets out
when its database fails, nothing of the failed call is written, and the next call succeeds."""

from __future__ import annotations

import inspect
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tether._failpoints import ARMED, STORE_POINTS, arm, disarm, parse_failpoints
from tether.errors import StoreUnavailable
from tether.records import RecordDraft, UserMessage
from tether.store import (
    CAPABILITIES,
    SessionKey,
    SqliteStore,
    Store,
    StoreCapabilities,
    with_failpoints,
)

from ..sqlite import open_sqlite

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def nothing_armed() -> Iterator[None]:
    assert not ARMED
    yield
    disarm()


def test_a_point_for_every_store_operation() -> None:
    operations = {
        f"store.{name}"
        for protocol in (Store, *CAPABILITIES.values())
        for name in dir(protocol)
        if inspect.iscoroutinefunction(getattr(protocol, name)) and not name.startswith("_")
    } - {"store.close"}
    assert set(STORE_POINTS) == operations
    assert list(STORE_POINTS) == sorted(STORE_POINTS)


async def test_the_wrapper_offers_what_the_store_offers(store: Store) -> None:
    wrapped = with_failpoints(store)
    assert with_failpoints(wrapped) is wrapped
    assert StoreCapabilities.of(wrapped).missing == StoreCapabilities.of(store).missing
    for protocol in (Store, *CAPABILITIES.values()):
        assert isinstance(wrapped, protocol) == isinstance(store, protocol), protocol


async def _conversation(store: Store) -> str:
    conversation, _ = await store.ensure_conversation(
        SessionKey("agent", "acme", "s"), conversation_id="c-1", created_at=NOW
    )
    return conversation.id


async def _say(store: Store, cid: str, body: str) -> None:
    head = await store.head(cid)
    await store.append(cid, [RecordDraft(UserMessage(body=body))], expected_seq=head, fence=0)


async def test_an_error_is_the_backends_failure_and_writes_nothing(store: Store) -> None:
    wrapped = with_failpoints(store)
    cid = await _conversation(wrapped)
    arm(parse_failpoints("store.append=error(once)"))
    with pytest.raises(StoreUnavailable, match=r"disk I/O error|server closed") as raised:
        await _say(wrapped, cid, "lost")
    cause = raised.value.__cause__
    kind = type(store).__module__
    if "sqlite" in kind:
        assert isinstance(cause, sqlite3.OperationalError) and str(cause) == "disk I/O error"
    elif "postgres" in kind:
        import psycopg

        assert isinstance(cause, psycopg.OperationalError)
    else:
        assert isinstance(cause, OSError)
    assert await store.head(cid) == 1  # conversation_created alone
    await _say(wrapped, cid, "kept")  # the fault was once: the store is as good as before
    assert await wrapped.verify(cid) == 2
    assert [r.kind for r in await store.read(cid)] == ["conversation_created", "user_message"]


async def test_a_delay_sleeps_before_the_call(store: Store) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    wrapped = with_failpoints(store, sleep=sleep)
    arm(parse_failpoints("store.ensure_conversation=delay(3)"))
    cid = await _conversation(wrapped)
    assert slept == [3.0] and await wrapped.head(cid) == 1


async def test_the_writers_commit_fails_as_a_disk_does(tmp_path: Path) -> None:
    """``sqlite.commit`` fails inside the writer, just before its COMMIT: the batch is rolled
    back, its callers hear StoreUnavailable, and the writer commits the next batch."""
    store = await open_sqlite(tmp_path)
    try:
        cid = await _conversation(store)
        arm(parse_failpoints("sqlite.commit=error(once)"))
        with pytest.raises(StoreUnavailable, match="disk I/O error"):
            await _say(store, cid, "lost")
        assert await store.head(cid) == 1
        await _say(store, cid, "kept")
        assert await store.verify(cid) == 2
    finally:
        await store.close()
    async with await SqliteStore.open(tmp_path) as again:  # what is durable: the second alone
        bodies = [
            r.payload.body for r in await again.read(cid) if isinstance(r.payload, UserMessage)
        ]
        assert bodies == ["kept"]
