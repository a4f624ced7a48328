"""An approver that dies the moment its decision is durable: the crash test's cut "after the
decision, before the requeue".

    python approve_worker.py STORE_URL APPROVAL_ID

It decides the gate through ``Runtime.approve`` over a store that SIGKILLs the process as
soon as a write that holds an ``approval_decided`` record returns, before the runtime can do
anything more (an earlier version requeued the parked run in a second commit, lost here).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from tether.engine import Runtime
from tether.records import ApprovalDecided, Record
from tether.store import Store, open_store


def dying_after_the_decision(store: Store) -> Store:
    class Dying:
        def __getattr__(self, name: str) -> Any:
            found = getattr(store, name)
            if name not in ("append", "append_decision"):
                return found

            async def write(*args: Any, **kwargs: Any) -> list[Record]:
                records: list[Record] = await found(*args, **kwargs)
                if any(r.kind == ApprovalDecided.KIND for r in records):
                    os.kill(os.getpid(), signal.SIGKILL)
                return records

            return write

    return Dying()


async def main(url: str, approval_id: str) -> None:
    store = dying_after_the_decision(await open_store(url))
    runtime = Runtime({}, store)
    await runtime.start(worker=False)
    await runtime.approve(approval_id, "approve", approver="ann")
    raise SystemExit("the decision was never written")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
