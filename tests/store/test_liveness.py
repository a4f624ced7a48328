"""Owner liveness locks (``OwnerLiveness``) on SQLite and PostgreSQL, held by real processes:
a lock is free once its holder dies, even by SIGKILL, and held while it is only paused."""

import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pytest

from tether._conformance import implements
from tether.errors import StoreUnavailable
from tether.store import (
    MemoryStore,
    NewSubmission,
    OwnerLiveness,
    SessionKey,
    Store,
    VersionStore,
    open_store,
)

from ..postgres import drop_schemas, fresh_schema, store_url
from ..processes import eventually_awaited, kill, reap, start

WORKER = str(Path(__file__).with_name("liveness_worker.py"))


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> Iterator[None]:
    yield
    drop_schemas()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data'}"
    return store_url(fresh_schema())


@pytest.fixture
async def liveness(url: str) -> AsyncIterator[OwnerLiveness]:
    store = await open_store(url)
    assert implements(store, OwnerLiveness)
    yield cast(OwnerLiveness, store)
    await store.close()


async def _workers(liveness: OwnerLiveness) -> list[str]:
    """The owners of the worker rows kept (``VersionStore``), as the holders put them."""
    return [row.owner_id for row in await cast(VersionStore, liveness).list_workers()]


def _holder(url: str, owner_id: str) -> subprocess.Popen[str]:
    process = start(
        [sys.executable, WORKER, url, owner_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "held\n"
    return process


async def test_a_killed_owner_is_dead_and_a_paused_one_is_not(
    url: str, liveness: OwnerLiveness
) -> None:
    killed, paused = _holder(url, "worker-killed"), _holder(url, "worker-paused")
    try:
        owners = {"worker-killed", "worker-paused", "worker-never-held"}
        assert await liveness.dead_owners(owners) == set()
        paused.send_signal(signal.SIGSTOP)
        kill(killed)
        # PostgreSQL frees a dead client's session lock when its backend sees the socket
        # close, a moment after the process is gone: nothing here can await that.
        dead = await eventually_awaited(
            lambda: liveness.dead_owners(owners), "the killed owner found dead"
        )
        assert dead == {"worker-killed"}
        assert await _workers(liveness) == ["worker-killed", "worker-paused"]
        await liveness.forget_owner("worker-killed")
        assert await liveness.dead_owners(owners) == set()  # forgotten: its claims are free
        assert await _workers(liveness) == ["worker-paused"]  # and what it served with it
        paused.send_signal(signal.SIGCONT)
    finally:
        kill(killed)
        kill(paused)


async def test_an_orderly_stop_leaves_nothing_behind(
    url: str, liveness: OwnerLiveness, tmp_path: Path
) -> None:
    holder = _holder(url, "worker-stopping")
    with pytest.raises(StoreUnavailable, match="in use"):
        await liveness.hold_liveness("worker-stopping")  # a live process holds it
    assert holder.stdin is not None
    holder.stdin.write("stop\n")
    holder.stdin.flush()
    assert holder.wait(60) == 0
    reap(holder)
    assert await liveness.dead_owners({"worker-stopping"}) == set()  # gone, not dead
    assert await _workers(liveness) == []  # what it served went with its lock
    if url.startswith("sqlite"):
        assert list((tmp_path / "data" / "tether.db-owners").iterdir()) == []
    await liveness.hold_liveness("worker-stopping")  # free to be taken again
    await liveness.hold_liveness("worker-stopping")  # idempotent
    assert await liveness.dead_owners({"worker-stopping"}) == set()  # ours: never dead
    await liveness.release_liveness("worker-stopping")
    await liveness.release_liveness("worker-stopping")


async def test_a_new_worker_forgets_the_dead_that_hold_no_claim(
    url: str, liveness: OwnerLiveness, tmp_path: Path
) -> None:
    """Workers that died idle leave nothing for a peer to take over, so nothing would ever
    look at their lock again: the next worker to take its own lock forgets them. One that
    died holding a claim is kept until its claim is taken over."""
    store = cast(Store, liveness)
    new = NewSubmission(
        id="sub-1",
        key=SessionKey("agent", "me"),
        conversation_id="conv-1",
        input={"kind": "user", "body": "hi"},
        created_at=datetime.now(UTC),
    )
    await store.admit(new)
    now = datetime.now(UTC)
    await store.claim(
        "sub-1",
        attempt_id="att-1",
        owner_id="worker-busy",
        lease_expires_at=now + timedelta(seconds=30),
        now=now,
    )
    holders = [_holder(url, owner) for owner in ("worker-idle", "worker-busy")]
    for holder in holders:
        kill(holder)
    owners = {"worker-idle", "worker-busy"}
    assert await liveness.dead_owners(owners) == owners
    await liveness.hold_liveness("worker-new")
    assert await liveness.dead_owners(owners) == {"worker-busy"}
    assert await _workers(liveness) == ["worker-busy"]  # the idle one's row went with it
    if url.startswith("sqlite"):
        names = {path.name for path in (tmp_path / "data" / "tether.db-owners").iterdir()}
        assert names == {"worker-busy.lock", "worker-new.lock"}


def test_the_memory_store_offers_no_liveness() -> None:
    assert not implements(MemoryStore(), OwnerLiveness)
