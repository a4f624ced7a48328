"""A store that offers only the core runs sessions end to end, passes the core conformance
cases (those of every capability skip), and a feature that needs a capability it lacks
fails with ``StoreCapabilityMissing`` naming it: from the runtime, from an attempt, and over
HTTP as a 501."""

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.demo import demo_agents, demo_subagents
from tether.engine import Limits, Retention, Runtime, Schedule, TenantBudget
from tether.errors import StoreCapabilityMissing
from tether.http import create_app
from tether.records import ToolCalled, ToolOutcome
from tether.store import (
    CAPABILITIES,
    ChangeFeed,
    GateStore,
    MemoryStore,
    OwnerLiveness,
    SqliteStore,
    Store,
    StoreCapabilities,
)
from tether.testing.storetest import StoreConformance

from .core_only import CoreOnlyStore

FAST: dict[str, Any] = {"claim_interval": 0.01}


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.01")


def test_a_core_only_store_offers_no_capability() -> None:
    capabilities = StoreCapabilities.of(CoreOnlyStore())
    assert capabilities.whole is not None
    assert capabilities.missing == tuple(CAPABILITIES)
    assert capabilities.waits is None


async def test_the_demo_runs_on_a_store_of_only_the_core() -> None:
    """A session, turns with tool calls (one slow, reporting progress), replies."""
    async with Runtime(demo_agents(), CoreOnlyStore(), **FAST) as runtime:
        first = await runtime.dispatch("assistant", "me", "what time is it?")
        second = await runtime.dispatch("assistant", "me", "research tides")
        async with asyncio.timeout(60):
            answers = [await runtime.wait(r.submission_id) for r in (first, second)]
        assert [a["status"] for a in answers] == ["succeeded", "succeeded"]
        assert "tides" in str(answers[1]["result"])
        assert first.conversation_id == second.conversation_id  # one session
        records = await runtime.records(first.conversation_id)
        called = [r.payload.tool for r in records if isinstance(r.payload, ToolCalled)]
        outcomes = [r.payload.status for r in records if isinstance(r.payload, ToolOutcome)]
        assert called == ["clock", "research"] and outcomes == ["ok", "ok"]
        assert await runtime.verify(first.conversation_id) == len(records)
        info = await runtime.submission(first.submission_id)
        assert info.children == [] and len(info.attempts) == 1
        tree = await runtime.tree(first.submission_id)
        assert tree.children == ()
        assert not await runtime.is_revoked("cookie-1")  # nothing can be revoked there


async def _missing(call: Any) -> str:
    with pytest.raises(StoreCapabilityMissing) as caught:
        await call
    assert caught.value.capability in str(caught.value)
    return caught.value.capability


async def test_a_feature_without_its_capability_says_which() -> None:
    async with Runtime(demo_agents(), CoreOnlyStore(), **FAST) as runtime:
        receipt = await runtime.dispatch("assistant", "me", "hello")
        async with asyncio.timeout(60):
            await runtime.wait(receipt.submission_id)
        schedule = Schedule("assistant", "me", every=60, body="hi", id="digest")
        assert await _missing(runtime.approvals()) == "gates"
        assert await _missing(runtime.inputs()) == "gates"
        assert (
            await _missing(runtime.approve(f"{receipt.conversation_id}.3", "approve", approver="a"))
            == "gates"
        )
        assert await _missing(runtime.sessions()) == "sessions"
        assert await _missing(runtime.erase_session("assistant", "me")) == "retention"
        assert await _missing(runtime.prune(Retention(keep_records=1))) == "sessions"
        assert await _missing(runtime.fork(receipt.conversation_id, at_seq=1)) == "forks"
        assert await _missing(runtime.add_schedule(schedule)) == "schedules"
        assert await _missing(runtime.schedules()) == "schedules"
        assert await _missing(runtime.delete_schedule("digest")) == "schedules"
        assert await _missing(runtime.revoke("cookie-1")) == "attachments"
        assert await _missing(runtime.tenant_usage("acme")) == "usage"


async def test_a_run_that_would_park_settles_naming_the_capability() -> None:
    """A gated tool asks for a person's approval: a store without gates cannot park the run
    to wait for one, so it settles failed, saying so, and the call is closed as denied."""
    async with Runtime(demo_agents(), CoreOnlyStore(), **FAST) as runtime:
        receipt = await runtime.dispatch("assistant", "me", "email bob: hi")
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
        assert settled["status"] == "failed"
        assert settled["errorCode"] == "store_capability_missing"
        assert "'gates'" in str(settled["error"])
        records = await runtime.records(receipt.conversation_id)
        outcomes = [r.payload.status for r in records if isinstance(r.payload, ToolOutcome)]
        assert outcomes == ["denied"]
        again = await runtime.dispatch("assistant", "me", "what time is it?")
        async with asyncio.timeout(60):
            assert (await runtime.wait(again.submission_id))["status"] == "succeeded"


@pytest.mark.parametrize(
    ("settings", "capability"),
    [
        ({"subagents": demo_subagents()}, "children"),
        (
            {"schedules": [Schedule("assistant", "me", every=60, body="hi", id="digest")]},
            "schedules",
        ),
        ({"retention": Retention(keep_records=10)}, "sessions"),
        ({"model_limits": {"openai": Limits(rate=(10, 60))}}, "limits"),
        ({"tenant_limits": {"*": Limits(concurrency=2)}}, "limits"),
        ({"tenant_budgets": {"*": TenantBudget(model_calls=5)}}, "usage"),
    ],
)
async def test_a_configured_feature_is_refused_at_start(
    settings: dict[str, Any], capability: str
) -> None:
    runtime = Runtime(demo_agents(), CoreOnlyStore(), **settings)
    assert await _missing(runtime.start()) == capability


async def test_http_answers_a_missing_capability_with_501() -> None:
    runtime = Runtime(demo_agents(), CoreOnlyStore(), **FAST)
    app = create_app(runtime, manage_runtime=True)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as client,
    ):
        response = await client.get("/sessions")
        assert response.status_code == 501
        error = response.json()["error"]
        assert error["type"] == "store_capability_missing"
        assert "'sessions'" in error["message"]
        answered = await client.post("/agents/assistant/me?wait=true", json={"body": "hello"})
        assert answered.status_code == 200


class TestCoreOnlyStore(StoreConformance):
    """The conformance suite on it: the core cases pass, every capability's skip."""

    machine_seconds = 5.0
    machine_min_operations = 50

    async def make_store(self, directory: Path) -> Store:
        return CoreOnlyStore()


def test_the_shipped_stores_declare_what_they_offer() -> None:
    """By subclassing the protocols (so mypy checks each method), and the runtime finds the
    same by looking."""
    assert GateStore in MemoryStore.__mro__ and OwnerLiveness in SqliteStore.__mro__
    assert StoreCapabilities.of(MemoryStore()).missing == ("change_feed", "liveness")
    assert ChangeFeed not in SqliteStore.__mro__


async def test_limits_of_one_worker_run_on_a_store_of_only_the_core() -> None:
    """``per_worker`` alone is kept in process: nothing of the store is needed."""
    agents = demo_agents()
    limited = {
        name: dataclasses.replace(definition, limits=Limits(per_worker=1))
        for name, definition in agents.items()
    }
    async with Runtime(limited, CoreOnlyStore(), **FAST) as runtime:
        receipts = [
            await runtime.dispatch("assistant", "me", "what time is it?", session=f"s{n}")
            for n in range(2)
        ]
        async with asyncio.timeout(60):
            answers = [await runtime.wait(r.submission_id) for r in receipts]
        assert [a["status"] for a in answers] == ["succeeded", "succeeded"]
