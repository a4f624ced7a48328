"""The built-in agent's ``wait_until`` tool (``timers=True``): the model pauses the run
durably; it parks without a lease, the engine wakes it at the time, and the tool's result
(and the transcript) is what a provider accepts. Off unless the application allows it."""

from collections.abc import Callable
from datetime import timedelta

import pytest
from pydantic import JsonValue

from tether.agent import Agent, agent_spec
from tether.engine import AgentDefinition, ManualClock, Runtime
from tether.models import Rule, ScriptedModel, ToolUse
from tether.records import StepRecorded, ToolCalled, ToolOutcome
from tether.store import WAIT_FOR_TIMER, Store, SubmissionStatus

from ..engine.test_control import wait_for_status
from ..engine.test_runtime import settle
from ..engine.waits import advance_until

Make = Callable[..., Runtime]

HOUR = timedelta(hours=1)


def _model(args: dict[str, JsonValue]) -> ScriptedModel:
    return ScriptedModel(
        [Rule("later", ToolUse("wait_until", args)), Rule("", lambda r: "back", on="tool")]
    )


def _define(model: ScriptedModel, *, timers: bool) -> dict[str, AgentDefinition]:
    spec = agent_spec(model, timers=timers)
    return {"bot": AgentDefinition(lambda instance, env: spec)}


async def test_the_model_waits_durably_and_goes_on_at_the_time(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    start = clock.now()
    model = _model({"seconds": HOUR.total_seconds()})
    async with make_runtime(_define(model, timers=True)) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "ping me later")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        parked = await store.get_submission(receipt.submission_id)
        assert parked.wait_reason == WAIT_FOR_TIMER and parked.wait_until == start + HOUR
        assert "wait_until" in [t.name for t in model.calls[0].tools]
        await clock.advance(HOUR.total_seconds())
        settled = await advance_until(clock, settle(runtime, receipt.submission_id), 0.25)
        assert settled.get("result") == "back", settled
        records = await runtime.records(receipt.conversation_id)
        payloads = [r.payload for r in records]
        [called] = [p for p in payloads if isinstance(p, ToolCalled)]
        [outcome] = [p for p in payloads if isinstance(p, ToolOutcome)]
        assert called.tool == "wait_until" and outcome.content == "Waited 3600 seconds."
        [slept] = [p for p in payloads if isinstance(p, StepRecorded)]
        assert slept.call_id == called.call_id and slept.name == "tether.sleep"
        assert len(model.calls) == 2  # the model was not asked again for the call


async def test_a_bad_wait_is_an_error_result_and_no_park(make_runtime: Make, store: Store) -> None:
    model = _model({"until": "tomorrow"})
    async with make_runtime(_define(model, timers=True)) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "ping me later")
        assert (await settle(runtime, receipt.submission_id))["result"] == "back"
        records = await runtime.records(receipt.conversation_id)
        [outcome] = [r.payload for r in records if isinstance(r.payload, ToolOutcome)]
        assert outcome.is_error and "RFC 3339" in outcome.content


async def test_the_wait_tool_is_offered_only_when_allowed(make_runtime: Make) -> None:
    model = _model({"seconds": 1})
    async with make_runtime(_define(model, timers=False)) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "ping me later")
        await settle(runtime, receipt.submission_id)
    assert "wait_until" not in [t.name for t in model.calls[0].tools]
    with pytest.raises(ValueError, match="shadow"):
        Agent(tools=[Agent(timers=True).tools["wait_until"]], timers=True)
