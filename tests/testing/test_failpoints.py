"""An application's own tool tested with failpoints, as docs/testing.md shows it: the
``tether_failpoints`` fixture (the plugin pytest loads from Tether's entry point) arms a
fault for one test and disarms it after; ``failpoints`` does the same in a ``with`` block."""

from __future__ import annotations

import asyncio

import pytest

from tether._failpoints import ARMED
from tether.agent import ToolPolicy, agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.errors import FailpointSpecInvalid
from tether.models import Rule, ScriptedModel, ToolUse
from tether.store import MemoryStore
from tether.testing import Failpoints, failpoints

forecasts: list[str] = []


@tool(idempotent=True, policy=ToolPolicy(retries=2, backoff=0))
async def weather(city: str) -> str:
    """Today's weather in a city."""
    forecasts.append(city)
    return "sunny"


def forecaster() -> dict[str, AgentDefinition]:
    model = ScriptedModel(
        [
            Rule("weather", ToolUse("weather", {"city": "Oslo"})),
            Rule("sunny", "It is sunny", on="tool"),
        ]
    )
    spec = agent_spec(model, tools=[weather])
    return {"forecaster": AgentDefinition(lambda instance, env: spec)}


async def test_the_tool_policy_rides_out_a_failed_call(tether_failpoints: Failpoints) -> None:
    forecasts.clear()
    tether_failpoints.arm("tool.call=error(once)")
    async with Runtime(forecaster(), MemoryStore()) as runtime:
        receipt = await runtime.dispatch("forecaster", "me", "the weather?")
        async with asyncio.timeout(60):
            outcome = await runtime.wait(receipt.submission_id)
    assert outcome == {"status": "succeeded", "result": "It is sunny"}
    assert tether_failpoints.fired("tool.call") == 1  # the first attempt failed
    assert forecasts == ["Oslo"]  # the second ran the tool


async def test_the_fixture_disarms_after_each_test(tether_failpoints: Failpoints) -> None:
    assert not ARMED
    tether_failpoints.arm("store.append=error(every(2)); model.request=delay(1)")
    assert len(ARMED) == 2 and str(tether_failpoints).startswith("store.append=error(every(2))")
    with pytest.raises(FailpointSpecInvalid):
        tether_failpoints.arm("store.append=error(twice)")
    assert len(ARMED) == 2
    tether_failpoints.clear()
    assert not ARMED


def test_a_with_block_arms_and_disarms() -> None:
    with failpoints("sse.send=hang(once)") as armed:
        assert [str(point) for point in ARMED] == ["sse.send=hang(once)"]
        assert armed.hits("sse.send") == 0
    assert not ARMED
