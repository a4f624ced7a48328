"""``GET /metrics``: a known workload through the HTTP app, scraped and parsed with the
Prometheus text parser, every number checked; its own scope.

In process (``asgi``), on each store, on the test's manual clock: a settlement's latency is
what the test moved the clock by.
"""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import HTTPConnection

from tether.auth import Identity
from tether.demo import demo_agents
from tether.engine import INSTRUMENTS, AgentDefinition, AgentSpec, Limits, ManualClock
from tether.journal import Turn
from tether.messages import Message, ModelRequest, ModelResponse, Usage
from tether.models import ScriptedModel, cost_of

from ..engine.agents import agent as define_agent
from ..engine.test_budget import define, looping
from ..engine.test_limits import Held, _turns
from ..engine.waits import until_emitted
from ..journal.harnesses import EchoHarness
from .conftest import Server, until_appended
from .test_budget import _parked_gate

Serve = Callable[..., Any]
MODEL = "openai:gpt-4.1-mini"
USAGE = Usage(input_tokens=100, output_tokens=20)


class RateLimited(Exception):
    """What a provider's SDK raises for a 429 (read by its ``status_code``)."""

    status_code = 429


class Priced:
    """One model call, on a model genai-prices knows, and its answer."""

    name, version = "priced", "1"

    async def run(self, turn: Turn) -> Any:
        request = ModelRequest(model=MODEL, messages=(*turn.history, *turn.inputs))
        return (await turn.model(request)).message.text


class Broken:
    name, version = "broken", "1"

    async def run(self, turn: Turn) -> Any:
        raise ValueError("this harness always fails")


def _agents() -> dict[str, AgentDefinition]:
    tries = 0

    def answer(request: ModelRequest) -> Any:
        nonlocal tries
        tries += 1
        if tries == 1:
            return RateLimited("slow down")  # the first try only: retried at once
        return ModelResponse(message=Message.assistant("hi"), usage=USAGE)

    model = ScriptedModel(answer)
    priced = AgentSpec(harness=Priced(), model=model)
    broken = AgentSpec(harness=Broken(), model=model)
    return {
        **demo_agents(),
        "echo": AgentDefinition(lambda instance, env: priced),
        "broken": AgentDefinition(lambda instance, env: broken),
    }


def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, by its name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def pending_approval(server: Server, conversation_id: str) -> str:
    async def pending() -> list[dict[str, Any]]:
        response = await server.client.get("/approvals", params={"status": "pending"})
        return list(response.json()["approvals"])

    [item] = await until_appended(server, conversation_id, pending)
    return str(item["approvalId"])


async def test_a_known_workload_scraped(asgi: Serve, clock: ManualClock) -> None:
    server: Server = await asgi(_agents())
    c = server.client
    waited = {"wait": "true"}
    for instance in ("a", "b"):
        done = await c.post(f"/agents/echo/{instance}", params=waited, json={"body": "hello"})
        assert done.json()["status"] == "succeeded", done.text
    failed = await c.post("/agents/broken/a", params=waited, json={"body": "hello"})
    assert failed.json()["status"] == "failed", failed.text
    parked = (
        await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})
    ).json()
    approval_id = await pending_approval(server, parked["conversationId"])

    async def waiting() -> bool:
        found = await c.get(f"/submissions/{parked['submissionId']}")
        return bool(found.json()["status"] == "waiting")

    await until_emitted(server.runtime, waiting)  # parked: its gate opened a commit before

    response = await c.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = scrape(response.text)
    # The store's state, read now: the parked run is waiting on its gate.
    assert value(samples, "tether_submissions_waiting", agent="assistant", reason="approval") == 1
    assert value(samples, "tether_gates_pending", agent="assistant", kind="approval") == 1
    assert value(samples, "tether_submissions_queued", agent="assistant") == 0
    assert value(samples, "tether_sse_subscribers") == 0

    await clock.advance(90)  # a person takes 90 s to decide
    decided = await c.post(
        f"/approvals/{approval_id}", json={"decision": "approve", "approver": "ann"}
    )
    assert decided.status_code == 200, decided.text
    info = (await c.get(f"/submissions/{parked['submissionId']}", params=waited)).json()
    assert info["settlement"]["status"] == "succeeded"

    samples = scrape((await c.get("/metrics")).text)
    expected = {
        ("tether_submissions_admitted_total", "echo"): 2,
        ("tether_submissions_admitted_total", "broken"): 1,
        ("tether_submissions_admitted_total", "assistant"): 1,
        ("tether_claims_total", "echo"): 2,
        ("tether_claims_total", "broken"): 1,
        ("tether_claims_total", "assistant"): 2,  # its first attempt parked; a second resumed
        ("tether_attempts_total", "echo"): 2,
        ("tether_attempts_total", "assistant"): 2,
        ("tether_attempt_retries_total", "echo"): 0,
        ("tether_provider_errors_total", "echo"): 0,  # by status: below
        ("tether_model_retries_total", "echo"): 1,
    }
    for (name, agent), count in expected.items():
        if name == "tether_provider_errors_total":
            continue
        assert value(samples, name, agent=agent) == count, (name, agent)
    assert value(samples, "tether_provider_errors_total", agent="echo", status="429") == 1
    assert value(samples, "tether_submissions_settled_total", agent="echo", status="succeeded") == 2
    assert value(samples, "tether_submissions_settled_total", agent="broken", status="failed") == 1
    assert (
        value(samples, "tether_submissions_settled_total", agent="assistant", status="succeeded")
        == 1
    )
    # Each try is a model call; the 429 was the first.
    calls = "tether_model_calls_total"
    assert value(samples, calls, agent="echo", model=MODEL, outcome="error") == 1
    assert value(samples, calls, agent="echo", model=MODEL, outcome="ok") == 2
    tokens = "tether_model_tokens_total"
    assert value(samples, tokens, agent="echo", model=MODEL, kind="input") == 200
    assert value(samples, tokens, agent="echo", model=MODEL, kind="output") == 40
    price = cost_of(MODEL, USAGE)
    if price is not None:  # genai-prices knows it (the dev extra installs it)
        cost = value(samples, "tether_model_cost_usd_total", agent="echo", model=MODEL)
        assert cost == pytest.approx(2 * price)
    # The settle latency: the manual clock stood still but for the 90 s the gate waited.
    latency = "tether_submission_settle_duration_seconds"
    assert value(samples, f"{latency}_count", agent="echo", status="succeeded") == 2
    assert value(samples, f"{latency}_sum", agent="echo", status="succeeded") == 0
    assert value(samples, f"{latency}_bucket", agent="echo", status="succeeded", le="0.1") == 2
    assistant = {"agent": "assistant", "status": "succeeded"}
    assert value(samples, f"{latency}_sum", **assistant) == 90
    assert value(samples, f"{latency}_bucket", **assistant, le="60.0") == 0
    assert value(samples, f"{latency}_bucket", **assistant, le="300.0") == 1
    assert value(samples, f"{latency}_bucket", **assistant, le="+Inf") == 1
    gates = "tether_gate_decision_duration_seconds"
    assert value(samples, f"{gates}_count", kind="approval") == 1
    assert value(samples, "tether_gate_decisions_total", kind="approval", decision="approve") == 1
    # Nothing is left waiting; the store gauges say so (a zero is no sample at all).
    assert value(samples, "tether_gates_pending", agent="assistant", kind="approval") == 0
    assert value(samples, "tether_submissions_running", agent="assistant") == 0
    # Commits the engine waited for: one admission each.
    commits = "tether_store_commit_duration_seconds"
    assert value(samples, f"{commits}_count", operation="admit") == 4
    assert value(samples, f"{commits}_count", operation="append_settled") >= 3
    assert ("tether_attempts_running", ()) in samples  # none now, and said so
    assert value(samples, "tether_attempts_running") == 0
    owner = server.runtime.config.owner_id
    assert value(samples, "tether_worker_info", owner_id=owner) == 1
    # Every instrument is listed, with or without a series yet.
    families = {family.name for family in text_string_to_metric_families(response.text)}
    assert {i.name.removesuffix("_total") for i in INSTRUMENTS} <= families
    # No label names a session, a submission or a conversation.
    labels = {label for _, pairs in samples for label, _ in pairs}
    assert labels <= {
        "agent",
        "model",
        "status",
        "reason",
        "kind",
        "decision",
        "outcome",
        "operation",
        "le",
        "owner_id",
    }


def _only(*scopes: str) -> Callable[[HTTPConnection], Identity]:
    def authenticate(request: HTTPConnection) -> Identity:
        return Identity("probe", scopes=frozenset(scopes))  # type: ignore[arg-type]

    return authenticate


async def test_metrics_needs_its_own_scope(asgi: Serve) -> None:
    reader: Server = await asgi(demo_agents(), authenticate=_only("sessions:read"))
    refused = await reader.client.get("/metrics")
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["type"] == "forbidden" and "metrics:read" in error["message"]
    monitor: Server = await asgi(demo_agents(), authenticate=_only("metrics:read"))
    assert (await monitor.client.get("/metrics")).status_code == 200
    assert (await monitor.client.get("/sessions")).status_code == 403  # and nothing else


async def test_two_apps_in_one_process_count_apart(asgi: Serve) -> None:
    """Each runtime has its own counters and each scrape its own registry: nothing is
    registered in prometheus_client's global one."""
    one: Server = await asgi(demo_agents())
    two: Server = await asgi(demo_agents())
    await one.client.post("/agents/assistant/me", params={"wait": "true"}, json={"body": "hi"})
    first = scrape((await one.client.get("/metrics")).text)
    second = scrape((await two.client.get("/metrics")).text)
    assert value(first, "tether_submissions_admitted_total", agent="assistant") == 1
    assert value(second, "tether_submissions_admitted_total", agent="assistant") == 0


async def test_scheduled_submissions_and_the_next_timer_are_gauged(
    asgi: Serve, clock: ManualClock
) -> None:
    """A delayed dispatch is counted ``scheduled`` and its due time read as seconds from now
    (the manual clock's); once aborted neither is left."""
    server: Server = await asgi(_agents())
    c = server.client
    samples = scrape((await c.get("/metrics")).text)
    assert ("tether_timers_next_due_seconds", ()) not in samples  # nothing waits for a time
    later = await c.post("/agents/echo/me", json={"body": "later", "afterSeconds": 60})
    assert later.status_code == 202, later.text
    submission = later.json()["submissionId"]
    samples = scrape((await c.get("/metrics")).text)
    assert value(samples, "tether_submissions_scheduled", agent="echo") == 1
    assert value(samples, "tether_submissions_queued", agent="echo") == 0
    assert value(samples, "tether_timers_next_due_seconds") == pytest.approx(60)
    await clock.advance(20)
    samples = scrape((await c.get("/metrics")).text)
    assert value(samples, "tether_timers_next_due_seconds") == pytest.approx(40)
    aborted = await c.post(f"/submissions/{submission}/abort", json={})
    assert aborted.status_code == 200, aborted.text
    await server.runtime.wait(submission)
    samples = scrape((await c.get("/metrics")).text)
    assert value(samples, "tether_submissions_scheduled", agent="echo") == 0
    assert ("tether_timers_next_due_seconds", ()) not in samples


async def test_submissions_held_back_by_a_limit_are_gauged_by_whose_limit(
    asgi: Serve, clock: ManualClock
) -> None:
    """Two runs of an agent whose runs in flight are limited to one: one runs, the other is
    counted held back by its agent's limit (the label names the agent, never a session)."""
    model = Held(clock)
    server: Server = await asgi(
        {"a": define_agent(EchoHarness(), model, limits=Limits(concurrency=1))}
    )
    ids = []
    for n in range(2):
        sent = await server.client.post("/agents/a/me", json={"body": "go", "session": f"s{n}"})
        ids.append(sent.json()["submissionId"])
    await asyncio.wait_for(model.entered.wait(), 30)
    await _turns(clock)
    samples = scrape((await server.client.get("/metrics")).text)
    assert value(samples, "tether_submissions_limited", agent="a", kind="agent") == 1
    assert value(samples, "tether_submissions_limited", agent="a", kind="tenant") == 0
    assert value(samples, "tether_submissions_running", agent="a") == 1
    model.release.set()
    async with asyncio.timeout(60):
        for submission in ids:
            await server.runtime.wait(submission)
    samples = scrape((await server.client.get("/metrics")).text)
    assert value(samples, "tether_submissions_limited", agent="a", kind="agent") == 0


async def test_budget_gates_and_exhausted_budgets_are_counted(asgi: Serve) -> None:
    """A run parks on its budget (a gate opened, pending), is extended once (a decision of
    kind budget), parks again, and a rejection settles it ``budget_exhausted``."""
    server: Server = await asgi({"a": define(looping())})
    c = server.client
    sent = await c.post(
        "/agents/a/me", json={"body": "go", "budget": {"modelCalls": 2, "onExhausted": "park"}}
    )
    submission = sent.json()["submissionId"]
    gate = await _parked_gate(server, submission)

    async def parked() -> bool:
        found = await c.get(f"/submissions/{submission}")
        return bool(found.json()["status"] == "waiting")

    await until_emitted(server.runtime, parked)
    samples = scrape((await c.get("/metrics")).text)
    assert value(samples, "tether_budget_gates_opened_total", agent="a") == 1
    assert value(samples, "tether_gates_pending", agent="a", kind="budget") == 1
    assert value(samples, "tether_submissions_waiting", agent="a", reason="budget") == 1
    extend = {"decision": "approve", "extension": {"modelCalls": 1}}
    assert (await c.post(f"/budgets/{gate['gateId']}", json=extend)).status_code == 200
    again = await _parked_gate(server, submission)
    assert (await c.post(f"/budgets/{again['gateId']}", json={"decision": "reject"})).is_success
    await server.runtime.wait(submission)
    samples = scrape((await c.get("/metrics")).text)
    assert value(samples, "tether_budget_gates_opened_total", agent="a") == 2
    decisions = "tether_gate_decisions_total"
    assert value(samples, decisions, kind="budget", decision="approve") == 1
    assert value(samples, decisions, kind="budget", decision="reject") == 1
    assert value(samples, decisions, kind="approval", decision="approve") == 0
    assert value(samples, "tether_budget_exhausted_total", agent="a") == 1
    assert value(samples, "tether_submissions_settled_total", agent="a", status="failed") == 1
    assert value(samples, "tether_gates_pending", agent="a", kind="budget") == 0


async def test_runs_held_back_by_their_tenants_limit_name_no_tenant(
    asgi: Serve, clock: ManualClock
) -> None:
    """Each tenant one run in flight: a tenant's second run is counted held back by its
    tenant's limit, under its agent; no label names the tenant."""
    model = Held(clock)
    server: Server = await asgi(
        {"a": define_agent(EchoHarness(), model)},
        settings={"tenant_limits": {"*": Limits(concurrency=1)}},
    )
    ids = [
        (await server.runtime.dispatch("a", tenant, "go", session=f"s{n}", tenant=tenant))
        for tenant, n in (("t1", 0), ("t1", 1), ("t2", 0))
    ]
    await asyncio.wait_for(model.entered.wait(), 30)
    await _turns(clock)
    samples = scrape((await server.client.get("/metrics")).text)
    assert value(samples, "tether_submissions_limited", agent="a", kind="tenant") == 1
    assert value(samples, "tether_submissions_limited", agent="a", kind="agent") == 0
    assert value(samples, "tether_submissions_running", agent="a") == 2
    assert not {v for _, pairs in samples for _, v in pairs} & {"t1", "t2"}
    model.release.set()
    async with asyncio.timeout(60):
        for receipt in ids:
            await server.runtime.wait(receipt.submission_id)
