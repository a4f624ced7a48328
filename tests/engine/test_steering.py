"""Steering checks ask the store only when a steer or follow-up may be waiting."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tether.agent import Tool, agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.messages import ModelRequest
from tether.models import ScriptedModel, ToolUse
from tether.store import Store, StoreCapabilities, SubmissionStatus
from tether.store.postgres import PostgresStore

from ..postgres import fresh_schema, store_url
from .conftest import FAST
from .test_control import wait_for_status
from .test_runtime import settle
from .waits import until_appended

Make = Callable[..., Runtime]


@tool
async def step(n: int) -> str:
    """One step."""
    return f"step {n} done"


def three_tool_rounds(request: ModelRequest) -> str | ToolUse:
    done = sum(1 for m in request.messages if m.role == "tool")
    return ToolUse("step", {"n": done}) if done < 3 else "finished"


def _agents(model: ScriptedModel, *tools: Tool, name: str = "bot") -> dict[str, AgentDefinition]:
    return {name: AgentDefinition(lambda i, e: agent_spec(model, tools=list(tools)))}


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


async def _listening(store: Store) -> None:
    """Once a store with a change feed has its LISTEN in place. Until then a notice may be
    missed, so the store then wakes every watch to look again (steers included): a run
    claimed before that moment makes one lookup, rightly."""
    feed = StoreCapabilities.of(store).change_feed
    if feed is not None:
        with feed.listen("work") as listening:  # a worker's channels, steers among them
            await listening.wait()  # set by the look-again that follows the LISTEN


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


async def test_a_run_the_claim_loop_takes_alone_in_its_session_makes_no_lookup(
    make_runtime: Make, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its claim said nothing of its session was queued behind it, so no steer can predate
    its watch: none of its safe points asks the store (one query a run saved, a round trip
    on PostgreSQL)."""
    agents = _agents(ScriptedModel(three_tool_rounds), step)
    admitting = make_runtime(agents)
    await admitting.start(worker=False)  # an API-only node: it admits, another runs
    receipt = await admitting.dispatch("bot", "acme", "go")
    await _listening(store)
    asked = _count_queued_lookups(store, monkeypatch)
    running = make_runtime(agents, claim_interval=30)
    async with running:
        assert (await settle(running, receipt.submission_id))["result"] == "finished"
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


@pytest.mark.postgres
async def test_a_steer_admitted_by_another_process_is_announced() -> None:
    """PostgreSQL NOTIFY tells the running worker of a steer another node admitted: it looks
    at its next safe point without polling (the claim interval is far beyond the run)."""
    schema = fresh_schema()
    release = asyncio.Event()
    agents = {**_held_agent(release), **_agents(ScriptedModel(["ready"]), name="quick")}
    async with (
        await PostgresStore.open(store_url(schema)) as running_store,
        await PostgresStore.open(store_url(schema)) as api_store,
    ):
        api = Runtime(agents, api_store, **{**FAST, "claim_interval": 30})
        await api.start(worker=False)
        try:
            async with Runtime(agents, running_store, **{**FAST, "claim_interval": 30}) as worker:
                # Once its claim loop is up, the worker claims what it admits: its run then
                # knows that no steer came before it, and looks only when one is announced.
                warm_up = await worker.dispatch("quick", "warm-up", "ready")
                await settle(worker, warm_up.submission_id)
                host = await worker.dispatch("bot", "acme", "start")
                await _until_the_tool_runs(running_store, host.conversation_id)
                with running_store.listen(f"steer:{host.conversation_id}") as announced:
                    await api.steer("bot", "acme", "turn left")
                    async with asyncio.timeout(60):  # the worker's watch heard it too
                        await announced.wait()
                release.set()
                result = (await settle(worker, host.submission_id))["result"]
                assert result == "start | turn left"
        finally:
            await api.close()


async def _until_the_tool_runs(store: Store, conversation_id: str) -> None:
    async def called() -> bool:
        return any(r.kind == "tool_called" for r in await store.read(conversation_id))

    await until_appended(store, conversation_id, called)
