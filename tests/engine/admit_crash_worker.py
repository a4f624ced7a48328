"""A process that admits one message, claiming it as a server does, and SIGKILLs itself at a
boundary of the two-commit path:

    python admit_crash_worker.py STORE_URL POINT MODEL_CALLS_FILE

POINT is ``claimed`` (the admission that claims it has committed: nothing of the run is
written), ``invoked`` (the model was called: the execution's start, held behind, is not
written) or ``settled`` (the settlement committed: the waiter never heard). Every model call
appends a line to MODEL_CALLS_FILE.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tether.engine import Runtime
from tether.messages import ModelRequest
from tether.models import ScriptedModel
from tether.store import open_store
from tether.testing.storetest import complete

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.engine.agents import echo_agent

POINTS = ("claimed", "invoked", "settled")


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def counted_model(calls: Path, armed: dict[str, bool]) -> ScriptedModel:
    def answer(request: ModelRequest) -> str:
        if armed["invoked"]:
            with calls.open("a") as log:
                log.write("call\n")
            die()
        return "echo: " + request.messages[-1].text

    return ScriptedModel(answer)


async def main(url: str, point: str, calls: Path) -> None:
    store = complete(await open_store(url))
    real_admit, real_settle = store.admit_and_claim, store.append_settled

    armed = dict.fromkeys(POINTS, False)

    async def admit_then_die(*args: Any, **kwargs: Any) -> Any:
        admission = await real_admit(*args, **kwargs)
        if armed["claimed"]:
            die()
        return admission

    async def settle_then_die(*args: Any, **kwargs: Any) -> Any:
        records = await real_settle(*args, **kwargs)
        if armed["settled"]:
            die()
        return records

    store.admit_and_claim = admit_then_die  # type: ignore[method-assign]
    store.append_settled = settle_then_die  # type: ignore[method-assign]
    agents = {"bot": echo_agent(counted_model(calls, armed))}
    async with Runtime(agents, store, claim_interval=0.05, lease=30.0) as runtime:
        warm = await runtime.dispatch("bot", "warm-up", "hello")  # the claim loop is up
        async with asyncio.timeout(60):
            await runtime.wait(warm.submission_id)
        armed[point] = True
        receipt = await runtime.dispatch("bot", "acme", "hello")
        async with asyncio.timeout(60):
            await runtime.wait(receipt.submission_id)
    raise SystemExit(f"reached the end without dying at {point}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
