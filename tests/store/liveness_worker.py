"""Holds an owner's liveness lock on a store until killed (or told to stop on stdin), printing
``held`` once it does (and has kept what it serves as a worker row): what the liveness tests
kill, pause and stop."""

import asyncio
import sys
from datetime import UTC, datetime

from tether._conformance import implements
from tether.store import OwnerLiveness, VersionStore, open_store


async def main(url: str, owner_id: str) -> None:
    store = await open_store(url)
    assert implements(store, OwnerLiveness)
    await store.hold_liveness(owner_id)  # type: ignore[attr-defined]
    if implements(store, VersionStore):  # says what it serves, as a worker of versions does
        await store.put_worker(owner_id, {"agent": ["v1"]}, now=datetime.now(UTC))  # type: ignore[attr-defined]
    print("held", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # an orderly stop: a line, or EOF
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
