"""A server's work, for the failpoint crash tests: dispatches the I/O-error loop's workload
and waits for it to settle, under whatever ``TETHER_FAILPOINTS`` says (a ``crash`` ends it
with SIGKILL where the test chose).

    python failpoint_worker.py STORE_URL ACKS_FILE

Each dispatch acknowledged is appended to ACKS_FILE (``d-N SUBMISSION_ID``) as it returns:
what a client was told, that the store must keep.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.engine.agents import echo_agent, loop_agent
from tests.engine.conftest import FAST
from tether.engine import Runtime

WORK = (
    ("loop", "a", "lookup the price"),
    ("echo", "a", "and then?"),
    ("echo", "b", "hello"),
)


def _acknowledge(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


async def main(url: str, acks: Path) -> None:
    async with Runtime({"loop": loop_agent(), "echo": echo_agent()}, url, **FAST) as runtime:
        receipts = []
        for n, (agent, session, body) in enumerate(WORK):
            receipt = await runtime.dispatch(
                agent, "acme", body, session=session, dispatch_id=f"d-{n}"
            )
            _acknowledge(acks, f"d-{n} {receipt.submission_id}")
            receipts.append(receipt)
        for receipt in receipts:
            async with asyncio.timeout(60):
                await runtime.wait(receipt.submission_id)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
