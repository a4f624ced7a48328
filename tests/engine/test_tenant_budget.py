"""Per-tenant budgets per period (issue 41, item 1): what all of a tenant's runs spend in a
UTC day or month, counted by the store's usage aggregate and reserved call by call."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tether.agent import agent_spec, tool
from tether.engine import (
    BUDGET_EXHAUSTED,
    AgentDefinition,
    App,
    Budget,
    ManualClock,
    Runtime,
    TenantBudget,
)
from tether.engine._tenant_budget import (
    TenantBudgetGate,
    UsageShare,
    budget_of,
    period_bounds,
    tenant_budget_meter,
)
from tether.messages import Message, ModelRequest, ModelResponse, TextPart, ToolCallPart, Usage
from tether.models import ScriptedModel
from tether.records import AssistantMessageCompleted, RecordDraft, format_time
from tether.store import (
    GateStatus,
    SqliteStore,
    Store,
    StoreCapabilities,
    UsageAsk,
    UsageLease,
    UsageLimit,
    UsageRefusal,
    UsageSpent,
    require_capability,
)

from ..processes import eventually_awaited, kill, start
from .conftest import FAST
from .test_runtime import settle

Make = Callable[..., Runtime]


def costly(tokens: int = 100) -> ScriptedModel:
    """A model that never stops: each answer calls ``lookup`` and reports ``tokens``."""

    def reply(request: ModelRequest) -> ModelResponse:
        step = sum(1 for m in request.messages if m.role == "assistant") + 1
        message = Message(
            role="assistant",
            parts=(
                TextPart(text=f"step {step}"),
                ToolCallPart(call_id=f"c{step}", name="lookup", args={"q": str(step)}),
            ),
        )
        half = tokens // 2
        return ModelResponse(message=message, usage=Usage(input_tokens=half, output_tokens=half))

    return ScriptedModel(reply)


@tool
async def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def define(model: ScriptedModel) -> AgentDefinition:
    spec = agent_spec(model, tools=[lookup])
    return AgentDefinition(lambda instance, env: spec)


def test_a_tenant_budget_has_a_period_and_no_wall_time() -> None:
    assert TenantBudget(model_calls=5).period == "day"
    assert TenantBudget(cost_usd=1.0, period="month").period == "month"
    with pytest.raises(ValidationError):
        TenantBudget(wall_time=60)
    with pytest.raises(ValidationError):
        TenantBudget.model_validate({"period": "week"})
    at = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert period_bounds("day", at) == (date(2026, 12, 31), date(2027, 1, 1))
    assert period_bounds("month", at) == (date(2026, 12, 1), date(2027, 1, 1))
    assert period_bounds("month", datetime(2026, 2, 10, tzinfo=UTC)) == (
        date(2026, 2, 1),
        date(2026, 3, 1),
    )
    budgets: dict[str, TenantBudget | list[TenantBudget]] = {
        "*": TenantBudget(model_calls=10),
        "acme": [TenantBudget(tokens=500), TenantBudget(cost_usd=9.0, period="month")],
    }
    assert budget_of(budgets, "acme", "day") == TenantBudget(tokens=500)
    assert budget_of(budgets, "acme", "month") == TenantBudget(cost_usd=9.0, period="month")
    assert budget_of(budgets, "globex", "day") == TenantBudget(model_calls=10)
    assert budget_of(budgets, "globex", "month") is None


async def test_a_tenants_runs_share_its_day_budget(make_runtime: Make, store: Store) -> None:
    """Every session of a tenant spends from one budget: once it is used up, a new run of
    another session stops before its first call; another tenant (``"*"``) has its own, and a
    run of no tenant spends from none."""
    acme_model, other_model, free_model = costly(), costly(), costly()
    agents = {"a": define(acme_model), "b": define(other_model), "free": define(free_model)}
    budgets = {"acme": TenantBudget(model_calls=3), "*": TenantBudget(tokens=250)}
    async with make_runtime(agents, tenant_budgets=budgets) as runtime:
        first = await runtime.dispatch("a", "acme-1", "go", tenant="acme")
        outcome = await settle(runtime, first.submission_id)
        assert outcome["errorCode"] == BUDGET_EXHAUSTED and acme_model.invocations == 3
        details = outcome["errorDetails"]
        assert isinstance(details, dict)
        assert details["scope"] == "tenant" and details["period"] == "day"
        assert (details["limit"], details["used"], details["max"]) == ("modelCalls", 3, 3)
        assert "tenant budget exhausted" in str(outcome["error"])
        assert outcome["result"] == "step 3"
        second = await runtime.dispatch("a", "acme-2", "go", session="s2", tenant="acme")
        outcome = await settle(runtime, second.submission_id)
        assert outcome["errorCode"] == BUDGET_EXHAUSTED and acme_model.invocations == 3
        other = await runtime.dispatch("b", "globex-1", "go", tenant="globex")
        outcome = await settle(runtime, other.submission_id)
        details = outcome["errorDetails"]
        assert isinstance(details, dict) and details["limit"] == "tokens"
        assert other_model.invocations == 3  # 100, 200 < 250, then 300: over by one call
        free = await runtime.dispatch("free", "i", "go", budget=Budget(model_calls=4))
        outcome = await settle(runtime, free.submission_id)
        assert free_model.invocations == 4  # its own budget stopped it, no tenant's
        usage = await runtime.tenant_usage("acme")
        assert usage.spent.model_calls == 3 and usage.spent.tokens == 300
        assert usage.spent.tool_calls == 3 and usage.budget == TenantBudget(model_calls=3)
        month = await runtime.tenant_usage("globex", period="month")
        assert month.spent.model_calls == 3 and month.budget is None


async def test_a_tenants_tool_calls_run_out_before_the_next_tool_call(
    make_runtime: Make,
) -> None:
    """``tool_calls`` is checked before each tool call the host runs, from the aggregate:
    the refused call is never run, and the run settles with the month's counts."""
    ran: list[str] = []

    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        ran.append(q)
        return f"found {q}"

    spec = agent_spec(costly(), tools=[lookup])
    agents = {"a": AgentDefinition(lambda instance, env: spec)}
    budgets = {"*": TenantBudget(tool_calls=2, period="month")}
    async with make_runtime(agents, tenant_budgets=budgets) as runtime:
        receipt = await runtime.dispatch("a", "desk", "go", tenant="acme")
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED and ran == ["1", "2"]
    details = outcome["errorDetails"]
    assert isinstance(details, dict)
    assert (details["limit"], details["used"], details["period"]) == ("toolCalls", 2, "month")


async def test_an_approved_extension_lets_the_run_go_on(make_runtime: Make) -> None:
    """Under ``park``, a tenant's run waits on a budget gate (scope ``tenant``); an approval
    lets this run spend its extension past the tenant's budget, a rejection settles it."""
    model = costly()
    budgets = {"acme": TenantBudget(model_calls=2, on_exhausted="park")}
    async with make_runtime({"a": define(model)}, tenant_budgets=budgets) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", tenant="acme")
        gate = await _pending_gate(runtime)
        assert gate.args["scope"] == "tenant" and gate.args["limit"] == "modelCalls"
        assert gate.args["budget"] == {"modelCalls": 2, "onExhausted": "park", "period": "day"}
        await runtime.decide_budget(
            gate.approval_id, "approve", extension=Budget(model_calls=2), approver="ops"
        )
        again = await _pending_gate(runtime, not_id=gate.approval_id)
        assert model.invocations == 4
        await runtime.decide_budget(again.approval_id, "reject", approver="ops")
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED and model.invocations == 4


async def _pending_gate(runtime: Runtime, not_id: str | None = None) -> Any:
    async with asyncio.timeout(60):
        while True:
            gates = (await runtime.budget_gates(status=GateStatus.PENDING)).gates
            found = [g for g in gates if g.approval_id != not_id]
            if found:
                return found[0]
            await asyncio.sleep(0.01)


def test_an_app_takes_tenant_budgets() -> None:
    app = App({"a": define(costly())}, tenant_budgets={"*": TenantBudget(cost_usd=1.0)})
    assert app.config.tenant_budgets == {"*": TenantBudget(cost_usd=1.0)}


async def test_the_day_turns_at_midnight_utc(store: Store) -> None:
    """Each call counts on the UTC day its record was made: a run that spans midnight
    spends on both days, and a budget used up at 23:59 has room again at 00:00."""
    usage = require_capability(StoreCapabilities.of(store).usage, "usage")
    before = datetime(2026, 12, 7, 23, 59, 50, tzinfo=UTC)
    # Admitted before the calls: a log's record times never go back, so an admission stamped
    # later (the real time, once past that midnight) would carry every call to its own day.
    cid = (await store.admit(_new("acme", before - timedelta(hours=1)))).submission.conversation_id
    for n, at in enumerate((before, before, before + timedelta(seconds=15))):
        head = await store.head(cid)
        completed = AssistantMessageCompleted(
            call_id=f"m{n}", message=Message.assistant("ok"), usage=Usage(input_tokens=5)
        )
        draft = RecordDraft(completed, time=format_time(at))
        await store.append(cid, [draft], expected_seq=head, fence=0)
    clock = ManualClock(before)
    gate = TenantBudgetGate(
        usage, {"acme": TenantBudget(model_calls=2)}, clock=clock, owner_id="w", lease=30, poll=1
    )
    budgets = gate.of("acme")
    meter = tenant_budget_meter(clock.now)
    with pytest.raises(Exception, match="tenant budget exhausted"):
        await gate.reserve("acme", budgets, meter)
    await clock.advance(11)  # 00:00:01: a new day, one call spent on it
    await gate.reserve("acme", budgets, meter)
    day_one = await usage.tenant_usage("acme", start=date(2026, 12, 7), end=date(2026, 12, 8))
    day_two = await usage.tenant_usage("acme", start=date(2026, 12, 8), end=date(2026, 12, 9))
    assert (day_one.model_calls, day_two.model_calls) == (2, 1)
    month = await usage.tenant_usage("acme", start=date(2026, 12, 1), end=date(2027, 1, 1))
    assert month.model_calls == 3 and month != UsageSpent()


def _new(tenant: str, created_at: datetime) -> Any:
    from tether.store import NewSubmission, SessionKey

    return NewSubmission(
        id="sub-1",
        key=SessionKey("a", "i", "default"),
        conversation_id="conv-1",
        input={"kind": "user", "body": "hi"},
        created_at=created_at,
        tenant=tenant,
    )


# --- crashes ---------------------------------------------------------------------------------

WORKER = Path(__file__).with_name("tenant_budget_worker.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.process
@pytest.mark.parametrize(("mode", "mark"), [("tool", "held"), ("call", "calling")])
async def test_a_worker_killed_mid_run_leaves_the_aggregate_exact(
    tmp_path: Path, mode: str, mark: str
) -> None:
    """SIGKILL a worker between a call's usage record and the next call's budget decision
    (``tool``), or with a call reserved and never answered (``call``); another worker resumes
    the run: the tenant's aggregate counts each recorded call once (it moved in the commit of
    each record), the dead worker's reservation expires, and the run stops at exactly the
    tenant's limit."""
    log = tmp_path / "calls.log"
    store = await SqliteStore.open(tmp_path)
    api = Runtime({"a": define(costly())}, store)  # admission only: no worker runs here
    await api.start(worker=False)
    receipt = await api.dispatch("a", "acme-desk", "go", tenant="acme")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (tmp_path / "worker.log").open("ab") as errors:
        worker = start(
            [sys.executable, str(WORKER), str(tmp_path), str(log), mode], stderr=errors, env=env
        )

    def reached() -> bool:
        return log.exists() and mark in log.read_text().splitlines()

    await eventually_awaited(
        lambda: asyncio.to_thread(reached), lambda: (tmp_path / "worker.log").read_text()
    )
    kill(worker)
    paid = log.read_text().splitlines().count("model")
    assert paid == 2
    usage = require_capability(StoreCapabilities.of(store).usage, "usage")
    today = datetime.now(UTC).date()
    spent = await usage.tenant_usage("acme", start=today, end=today + timedelta(days=1))
    assert spent.model_calls == _completions(await api.records(receipt.conversation_id))
    model = costly()
    budgets = {"acme": TenantBudget(model_calls=5)}
    settings: dict[str, Any] = {**FAST, "tenant_budgets": budgets, "limit_poll": 0.05}
    async with Runtime({"a": define(model)}, store, **settings) as again:  # the real clock
        outcome = await settle(again, receipt.submission_id)
        records = await again.records(receipt.conversation_id)
        after = await again.tenant_usage("acme")
    await api.close()
    assert outcome["errorCode"] == BUDGET_EXHAUSTED
    assert model.invocations == 3  # 2 + 3 = the limit: none bought again, none over
    assert after.spent.model_calls == _completions(records) == 5
    await store.close()


def _completions(records: list[Any]) -> int:
    return sum(
        1
        for r in records
        if isinstance(r.payload, AssistantMessageCompleted) and not r.payload.interrupted
    )


async def test_a_long_call_keeps_its_reservation_across_leases(
    make_runtime: Make, store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model call that runs for several leases keeps its reservation: the run's own
    heartbeat, which renews its claim, renews it too, even while the worker's claim loop is
    stuck in a pass (a slow store); another worker asking for the tenant's last call
    meanwhile is told to wait, never granted it."""
    from tether.store import UsageAsk, UsageLimit

    from .test_limits import Held

    model = Held(clock)
    usage = require_capability(StoreCapabilities.of(store).usage, "usage")
    spec = agent_spec(model)
    agents = {"a": AgentDefinition(lambda instance, env: spec)}
    budgets = {"acme": TenantBudget(model_calls=1)}
    async with make_runtime(agents, tenant_budgets=budgets) as runtime:
        for _ in range(5):  # its claim loop is up: the admission claims
            await clock.advance(0.05)
            await asyncio.sleep(0.01)

        async def stuck() -> None:
            await asyncio.Event().wait()  # until the runtime closes

        monkeypatch.setattr(runtime._coordinator, "claim_runnable", stuck)
        receipt = await runtime.dispatch("a", "acme-desk", "go", tenant="acme")
        while not model.entered.is_set():
            await clock.advance(0.05)
            await asyncio.sleep(0.01)
        lease = runtime.config.lease
        for _ in range(int(3 * lease / 0.1)):  # three leases, a heartbeat every lease / 3
            await clock.advance(0.1)
            await asyncio.sleep(0.005)
        start, end = period_bounds("day", clock.now())
        limits = (UsageLimit(start, end, model_calls=1),)
        until = clock.now() + timedelta(seconds=lease)
        refused = await usage.reserve_usage(
            UsageAsk("acme", "probe", "probe", until, limits), now=clock.now()
        )
        assert refused is not None and refused.waiting and refused.reserved.calls == 1
        model.release.set()
        outcome = await settle(runtime, receipt.submission_id)
        assert outcome["status"] == "succeeded"


async def test_a_worker_takes_its_calls_from_a_share_given_back_as_they_are_appended(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """A worker reserves a share of its tenant's budget at once and takes its runs' calls from
    it: one store reservation for five calls; each completion's append gives its call's back,
    and the calls never made go back when the runtime stops."""
    usage = require_capability(StoreCapabilities.of(store).usage, "usage")
    leases: list[int] = []
    lease = usage.lease_usage

    async def counted(ask: UsageAsk, *, now: datetime) -> UsageLease | UsageRefusal:
        found = await lease(ask, now=now)
        leases.append(found.calls if isinstance(found, UsageLease) else 0)
        return found

    usage.lease_usage = counted  # type: ignore[method-assign]
    model = costly()
    budgets = {"acme": TenantBudget(model_calls=100)}

    async def held() -> int:
        now = clock.now()
        start, end = period_bounds("day", now)
        probe = UsageAsk(
            "acme", "probe", "probe", now + timedelta(seconds=30), (UsageLimit(start, end, 0),)
        )
        refused = await usage.reserve_usage(probe, now=now)
        assert refused is not None
        return refused.reserved.calls

    async with make_runtime({"a": define(model)}, tenant_budgets=budgets) as runtime:
        run = await runtime.dispatch("a", "i", "go", tenant="acme", budget=Budget(model_calls=5))
        outcome = await settle(runtime, run.submission_id)
        assert outcome["errorCode"] == BUDGET_EXHAUSTED and model.invocations == 5
        assert leases == [16]  # one round trip for the five calls
        assert (await runtime.tenant_usage("acme")).spent.model_calls == 5
        assert await held() == 11  # the five calls' reservations went with their completions
    assert await held() == 0  # the share's calls never made: given back at the stop


async def test_a_share_gives_back_what_no_append_will(store: Store) -> None:
    """The gate's own give-backs: an answered call whose completion its attempt never
    appended, when the attempt ends; an unanswered call's reservation goes back to the share
    (no store write); a share no call took from since the last heartbeat's pass, at the next."""
    usage = require_capability(StoreCapabilities.of(store).usage, "usage")
    clock = ManualClock(datetime(2026, 12, 7, 12, tzinfo=UTC))
    gate = TenantBudgetGate(
        usage, {"acme": TenantBudget(model_calls=100)}, clock=clock, owner_id="w", lease=30, poll=1
    )
    budgets, meter = gate.of("acme"), tenant_budget_meter(clock.now)

    async def held() -> int:
        now = clock.now()
        start, end = period_bounds("day", now)
        probe = UsageAsk(
            "acme", "probe", "probe", now + timedelta(seconds=30), (UsageLimit(start, end, 0),)
        )
        refused = await usage.reserve_usage(probe, now=now)
        assert refused is not None
        return refused.reserved.calls

    share = UsageShare()
    gate.done(await gate.reserve("acme", budgets, meter), share)  # answered, never appended
    assert await held() == 16
    await gate.forget("acme", share)
    assert await held() == 15 and share.answered == share.appended
    gate.done(await gate.reserve("acme", budgets, meter), None)  # failed: back to the share
    assert await held() == 15
    await gate.renew()  # a call took from the share since the last pass: kept, renewed
    assert await held() == 15
    await clock.advance(6)
    await gate.renew()  # none since: given back
    assert await held() == 0
