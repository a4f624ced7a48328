"""A run confirms its claim before each effect once its heartbeats were missed: a worker
frozen past its lease, whose claim another worker took over, makes no model call or tool run
when it wakes (the fence would refuse its writes, but only after the call was made)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import JsonValue

from tether.engine import ManualClock, Runtime
from tether.errors import StoreUnavailable
from tether.journal import Turn
from tether.messages import ModelRequest, ToolCall
from tether.models import ScriptedModel
from tether.store import Store
from tether.testing import RecordingTools

from .agents import agent
from .takeover import ANOTHER_WORKER, claims_held_still, take_over
from .waits import WAIT

Make = Callable[..., Runtime]


class FrozenHarness:
    """Reads its history, then stops (as a frozen process would) until told to go on, and
    then calls its model or runs a tool."""

    name, version = "frozen", "1"

    def __init__(self, effect: str) -> None:
        self.effect = effect
        self.reading, self.go = asyncio.Event(), asyncio.Event()

    async def run(self, turn: Turn) -> JsonValue:
        request = ModelRequest(model="test", messages=(*turn.history, *turn.inputs))
        self.reading.set()
        await self.go.wait()
        if self.effect == "model":
            return (await turn.model(request)).message.text
        result = await turn.tool(ToolCall(call_id="c-1", name="send_email", args={}))
        return result.content


@pytest.mark.parametrize("effect", ["model", "tool"])
async def test_a_run_whose_claim_was_taken_over_while_frozen_makes_no_effect(
    make_runtime: Make, store: Store, clock: ManualClock, effect: str
) -> None:
    harness, model, tools = FrozenHarness(effect), ScriptedModel(lambda r: "hi"), RecordingTools()
    # One run at a time: with the frozen run active, the worker's claim passes claim nothing
    # (one in flight as the takeover begins would otherwise take the released claim).
    agents = {"frozen": agent(harness, model, tools)}
    async with make_runtime(agents, max_concurrent_runs=1) as runtime:
        receipt = await runtime.dispatch("frozen", "acme", "hello")
        await asyncio.wait_for(harness.reading.wait(), WAIT)
        mine = await store.get_submission(receipt.submission_id)

        # Frozen past its lease: no heartbeat of it renews the claim...
        async def frozen(*args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailable("frozen")

        with claims_held_still(store), pytest.MonkeyPatch.context() as patch:
            patch.setattr(store, "renew_lease", frozen)
            await clock.advance(runtime.config.lease + 1)
            # ... and another worker takes it over.
            await take_over(store, clock, mine)
        harness.go.set()  # it wakes, between reading its log and its effect
        coordinator = runtime._coordinator
        assert coordinator is not None
        async with asyncio.timeout(WAIT):
            while coordinator.active:
                await asyncio.gather(*coordinator.active.values(), return_exceptions=True)
    assert model.calls == [] and tools.calls == []
    assert (await store.get_submission(mine.id)).owner_id == ANOTHER_WORKER
    records = await store.read(mine.conversation_id)
    assert not [r for r in records if r.attempt_id == mine.attempt_id and r.seq > 1]
