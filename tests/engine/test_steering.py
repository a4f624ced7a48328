"""Steering checks ask the store only when a steer or follow-up may be waiting."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tether.agent import Tool, agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.messages import ModelRequest
from tether.models import ScriptedModel, ToolUse
from tether.store import Store, SubmissionStatus

from .test_control import wait_for_status
from .test_runtime import settle

Make = Callable[..., Runtime]


@tool
async def step(n: int) -> str:
    """One step."""
    return f"step {n} done"


def three_tool_rounds(request: ModelRequest) -> str | ToolUse:
    done = sum(1 for m in request.messages if m.role == "tool")
    return ToolUse("step", {"n": done}) if done < 3 else "finished"


def _agents(model: ScriptedModel, *tools: Tool) -> dict[str, AgentDefinition]:
    return {"bot": AgentDefinition(lambda i, e: agent_spec(model, tools=list(tools)))}


def _held_agent(release: asyncio.Event) -> dict[str, AgentDefinition]:
    """An agent whose one tool waits for ``release``, then answers with every user message."""

    @tool
    async def slow() -> str:
        """Slow."""
        await asyncio.wait_for(release.wait(), 60)
        return "slow done"

    def reply(request: ModelRequest) -> str | ToolUse:
        users = [m.text for m in request.messages if m.role == "user"]
        return ToolUse("slow") if len(users) == 1 else " | ".join(users)

    return _agents(ScriptedModel(reply), slow)


def _count_queued_lookups(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The steering lookups (queued submissions of one conversation) the store is asked."""
    asked: list[Any] = []
    real = store.list_submissions

    async def counting(status: SubmissionStatus | None = None, **kwargs: Any) -> list[Any]:
        if status is SubmissionStatus.QUEUED and kwargs.get("conversation_id"):
            asked.append(kwargs["conversation_id"])
        return await real(status, **kwargs)

    monkeypatch.setattr(store, "list_submissions", counting)
    return asked


async def test_no_steering_costs_no_store_query(
    make_runtime: Make, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four safe points (three tool batches and the answer), none of them a query: the
    runtime would have heard of a steer (this process admits them, or a change feed tells)."""
    asked = _count_queued_lookups(store, monkeypatch)
    # A poll interval far beyond the run: only what is heard can cause a lookup.
    runtime = make_runtime(_agents(ScriptedModel(three_tool_rounds), step), claim_interval=30)
    async with runtime:
        # The first claims are the claim loop's (admissions claim once it has started up),
        # and a run the loop claims looks once: steering may have been queued behind it.
        warm_up = await runtime.dispatch("bot", "warm-up", "go")
        await settle(runtime, warm_up.submission_id)
        asked.clear()
        receipt = await runtime.dispatch("bot", "acme", "go")
        assert (await settle(runtime, receipt.submission_id))["result"] == "finished"
    assert asked == []


async def test_a_steer_admitted_here_is_looked_for_at_the_next_safe_point(
    make_runtime: Make, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = asyncio.Event()
    agents = _held_agent(release)
    asked = _count_queued_lookups(store, monkeypatch)
    runtime = make_runtime(agents, claim_interval=30)
    async with runtime:
        host = await runtime.dispatch("bot", "acme", "start")
        await wait_for_status(runtime, host.submission_id, SubmissionStatus.RUNNING)
        await runtime.steer("bot", "acme", "turn left")
        release.set()
        assert (await settle(runtime, host.submission_id))["result"] == "start | turn left"
    assert asked == [host.conversation_id]  # one look, after the tool batch


async def test_steers_queued_before_a_run_is_claimed_are_looked_for_at_once(
    make_runtime: Make, store: Store
) -> None:
    """A run the claim loop takes (not its admission) may find steering queued behind it."""
    release = asyncio.Event()
    agents = _held_agent(release)
    admitting = make_runtime(agents)
    await admitting.start(worker=False)  # an API-only node: it admits, another runs
    host = await admitting.dispatch("bot", "acme", "start")
    steer = await admitting.steer("bot", "acme", "turn left")
    running = make_runtime(agents, claim_interval=30)
    async with running:
        release.set()
        assert (await settle(running, host.submission_id))["result"] == "start | turn left"
        assert (await settle(running, steer.submission_id))["status"] == "succeeded"
