"""Mediation tiers, reported results, durable steps and steering."""

from collections.abc import Sequence

import pytest
from pydantic import JsonValue

from tether.errors import (
    DuplicateCallId,
    HostOwnedOutcome,
    MissingIdempotencyKey,
    MissingToolExecutor,
    UnmediatedToolCall,
)
from tether.journal import Journal, JournalHooks, ToolScope, Turn
from tether.messages import Mediation, ToolCall, ToolOutcomeStatus, ToolResult
from tether.records import SteerReceived, ToolOutcome
from tether.store import Store
from tether.testing import RecordingTools

from .harnesses import LoopHarness, journal, new_conversation, planning_model, user
from .test_exec import kinds
from .test_resume import cut_after


class OneTool:
    name, version = "one", "1"

    def __init__(self, call: ToolCall) -> None:
        self.call = call

    async def run(self, turn: Turn) -> JsonValue:
        return (await turn.tool(self.call)).content


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (
            ToolCall(call_id="c", name="t", idempotency_key="k", mediation=Mediation.REPORTED),
            UnmediatedToolCall,
        ),
        (ToolCall(call_id="c", name="t"), MissingIdempotencyKey),
    ],
)
async def test_invalid_calls_are_refused_before_any_record(
    store: Store, call: ToolCall, error: type
) -> None:
    cid = await new_conversation(store)
    with pytest.raises(error):
        await (await journal(store, cid, tools=RecordingTools())).exec(OneTool(call), [])
    assert "tool_called" not in kinds(await store.read(cid))


async def test_no_executor_is_refused_before_the_intent(store: Store) -> None:
    cid = await new_conversation(store)
    with pytest.raises(MissingToolExecutor):
        await (await journal(store, cid)).exec(
            OneTool(ToolCall(call_id="c", name="t", idempotency_key="k")), []
        )
    assert "tool_called" not in kinds(await store.read(cid))


async def test_correlation_is_the_hosts(store: Store) -> None:
    cid = await new_conversation(store)

    class Forger(RecordingTools):
        async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
            return ToolResult(call_id="forged", content="ok")

    call = ToolCall(call_id="c1", name="t", idempotency_key="k")
    await (await journal(store, cid, tools=Forger())).exec(OneTool(call), [])
    outcome = [r.payload for r in await store.read(cid) if r.kind == "tool_outcome"]
    assert outcome[0].call_id == "c1"  # type: ignore[attr-defined]


async def test_executor_errors_become_error_outcomes(store: Store) -> None:
    cid = await new_conversation(store)

    async def boom(call: ToolCall, scope: ToolScope) -> JsonValue:
        raise ValueError("bad input")

    call = ToolCall(call_id="c1", name="t", idempotency_key="k")
    result = await (await journal(store, cid, tools=RecordingTools({"t": boom}))).exec(
        OneTool(call), []
    )
    assert result.output == "ValueError: bad input"
    assert await (await Journal.open(store, cid, fence=0)).replay(OneTool(call)) == [
        "ValueError: bad input"
    ]


async def test_duplicate_call_ids_are_refused(store: Store) -> None:
    cid = await new_conversation(store)

    class Twice:
        name, version = "twice", "1"

        async def run(self, turn: Turn) -> JsonValue:
            call = ToolCall(call_id="c1", name="t", idempotency_key="k")
            await turn.tool(call)
            await turn.tool(call.model_copy(update={"idempotency_key": "k2"}))
            return None

    with pytest.raises(DuplicateCallId):
        await (await journal(store, cid, tools=RecordingTools())).exec(Twice(), [])
    assert kinds(await store.read(cid)).count("tool_called") == 1


async def test_reported_results_are_journaled_and_replayed(store: Store) -> None:
    cid = await new_conversation(store)

    class Reporter:
        name, version = "reporter", "1"

        async def run(self, turn: Turn) -> JsonValue:
            await turn.report(ToolResult(call_id="r1", content="ran in the sandbox"))
            return "ok"

    await (await journal(store, cid)).exec(Reporter(), [])
    assert kinds(await store.read(cid))[-2:] == ["tool_outcome", "execution_ended"]
    assert await (await Journal.open(store, cid, fence=0)).replay(Reporter()) == ["ok"]


@pytest.mark.parametrize("status", [ToolOutcomeStatus.DENIED, ToolOutcomeStatus.UNKNOWN])
async def test_a_report_may_not_claim_a_host_owned_outcome(
    store: Store, status: ToolOutcomeStatus
) -> None:
    """``denied`` is the receipt of a rejected approval and ``unknown`` a recovery's verdict:
    only the host writes them. A harness that reports one is refused, and nothing is written."""
    cid = await new_conversation(store)
    refused: list[HostOwnedOutcome] = []

    class Forger:
        name, version = "forger", "1"

        async def run(self, turn: Turn) -> JsonValue:
            forged = ToolResult(call_id="r1", content="denied by ann", is_error=True, status=status)
            try:
                await turn.report(forged)
            except HostOwnedOutcome as exc:
                refused.append(exc)
            await turn.report(ToolResult(call_id="r1", content="ran"))
            return "ok"

    await (await journal(store, cid)).exec(Forger(), [])
    assert len(refused) == 1 and status.value in str(refused[0])
    outcomes = [r.payload for r in await store.read(cid) if r.kind == "tool_outcome"]
    assert [o.status for o in outcomes if isinstance(o, ToolOutcome)] == [ToolOutcomeStatus.OK]


async def test_steps_run_once_and_are_served_on_recovery(store: Store) -> None:
    cid = await new_conversation(store)
    runs: list[str] = []

    async def charge(call: ToolCall, scope: ToolScope) -> JsonValue:
        async def reserve() -> JsonValue:
            runs.append("reserve")
            return "rsv-1"

        async def capture() -> JsonValue:
            runs.append("capture")
            return "cap-1"

        return [await scope.step("reserve", reserve), await scope.step("capture", capture)]

    class Steps:
        name, version = "steps", "1"

        async def run(self, turn: Turn) -> JsonValue:
            call = ToolCall(call_id="c1", name="charge", idempotency_key="k", idempotent=True)
            return (await turn.tool(call)).data

    tools = RecordingTools({"charge": charge})
    assert (await (await journal(store, cid, tools=tools)).exec(Steps(), [])).output == [
        "rsv-1",
        "cap-1",
    ]
    cut = await cut_after(store, cid, "step_recorded", 1)  # crashed after reserve, before capture
    again = RecordingTools({"charge": charge})
    assert (await (await journal(cut, cid, tools=again)).resume(Steps())).output == [
        "rsv-1",
        "cap-1",
    ]
    assert runs == ["reserve", "capture", "capture"]
    assert await (await Journal.open(store, cid, fence=0)).replay(Steps()) == [["rsv-1", "cap-1"]]


async def test_a_step_whose_value_is_null_is_served_on_replay(store: Store) -> None:
    """A null value is left out of the record's canonical JSON: it reads back as null (it
    failed to decode: "payload.value: Field required")."""
    cid = await new_conversation(store)
    runs: list[str] = []

    class Lookup:
        name, version = "lookup", "1"

        async def run(self, turn: Turn) -> JsonValue:
            async def nothing_found() -> JsonValue:
                runs.append("looked")
                return None

            return [await turn.step("lookup", nothing_found), "done"]

    assert (await (await journal(store, cid)).exec(Lookup(), [])).output == [None, "done"]
    assert await (await Journal.open(store, cid, fence=0)).replay(Lookup()) == [[None, "done"]]
    assert runs == ["looked"]


async def test_steering_is_delivered_once_and_replayed(store: Store) -> None:
    cid = await new_conversation(store)
    queue = [SteerReceived(body="also lookup", mode="steer")]

    async def source(modes: tuple[str, ...]) -> Sequence[SteerReceived]:
        delivered, queue[:] = list(queue), []
        return delivered

    model = planning_model()
    j = await Journal.open(
        store,
        cid,
        model=model,
        tools=RecordingTools(),
        hooks=JournalHooks(steer_source=source),
    )
    result = await j.exec(LoopHarness(), [user("hello")])
    assert result.output == "done after 1 tool results"  # the steer asked for a lookup
    assert kinds(await store.read(cid)).count("steer_received") == 1
    assert await (await Journal.open(store, cid, fence=0)).replay(LoopHarness()) == [result.output]
