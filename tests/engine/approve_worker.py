"""An approver that dies around its decision's commit: the crash test's cut "after the
decision, before the requeue", and the one just before the decision.

    python approve_worker.py STORE_URL APPROVAL_ID before|after [approve|answer]

It decides the gate through ``Runtime.approve`` over a store that SIGKILLs the process just
before the write that holds the ``approval_decided`` record is made (``before``), or as soon
as it returns (``after``), before the runtime can do anything more: an earlier version
requeued the parked run in a second commit, which ``after`` loses. ``answer`` answers an
input (``Runtime.answer``) instead: the same commit, the same cuts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from tether.engine import Runtime
from tether.records import ApprovalDecided, InputAnswered, Record, RecordDraft
from tether.store import Store, open_store

_DECISIONS = frozenset({ApprovalDecided.KIND, InputAnswered.KIND})


def dying_at_the_decision(store: Store, when: str) -> Store:
    class Dying:
        def __getattr__(self, name: str) -> Any:
            found = getattr(store, name)
            if name not in ("append", "append_decision"):
                return found

            async def write(
                conversation_id: str, drafts: Sequence[RecordDraft], **kwargs: Any
            ) -> list[Record]:
                deciding = any(d.payload.KIND in _DECISIONS for d in drafts)
                if deciding and when == "before":
                    os.kill(os.getpid(), signal.SIGKILL)
                records: list[Record] = await found(conversation_id, drafts, **kwargs)
                if deciding and when == "after":
                    os.kill(os.getpid(), signal.SIGKILL)
                return records

            return write

    return Dying()


async def main(url: str, approval_id: str, when: str, how: str) -> None:
    store = dying_at_the_decision(await open_store(url), when)
    runtime = Runtime({}, store)
    await runtime.start(worker=False)
    if how == "answer":
        await runtime.answer(approval_id, "Ann", responder="ann")
    else:
        await runtime.approve(approval_id, "approve", approver="ann")
    raise SystemExit("the decision was never written")


if __name__ == "__main__":
    how = sys.argv[4] if len(sys.argv) > 4 else "approve"
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], how))
