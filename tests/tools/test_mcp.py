"""``tether.tools.mcp``: a real MCP server (tests/tools/mcp_server.py, written with the SDK),
over stdio and HTTP on 127.0.0.1, its tools offered to the built-in agent and every call
journaled: replay calls nothing, a server that died mid-call leaves an unknown outcome and
is started again, approvals gate destructive tools, a changed tool list is a divergence."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.agent import Toolset, agent_spec
from tether.engine import (
    AgentDefinition,
    ManualClock,
    RecoveryDecided,
    Runtime,
    SystemClock,
    ToolProgress,
)
from tether.errors import McpToolsChanged
from tether.journal import Harness, Journal
from tether.messages import ToolOutcomeStatus
from tether.models import Rule, ScriptedModel, ToolUse
from tether.records import ApprovalRequested, StepRecorded, ToolCalled, ToolOutcome
from tether.store import MemoryStore, SqliteStore, Store
from tether.tools import mcp

from ..engine.conftest import FAST
from ..engine.waits import until_emitted
from ..processes import eventually, kill, start
from . import mcp_worker
from .mcp_support import SERVER, alive, calling_model, ledger, server_command

pytestmark = pytest.mark.process


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    return tmp_path / "ledger.jsonl"


def stdio(calls: Path, **options: Any) -> Toolset:
    env = {"MCP_LEDGER": str(calls), **options.pop("env", {})}
    return mcp(command=server_command(), name="calc", env=env, **options)


def bot(
    toolset: Toolset, *then: Rule, model: ScriptedModel | None = None
) -> dict[str, AgentDefinition]:
    spec = agent_spec(model or calling_model(*then), tools=[toolset])
    return {"bot": AgentDefinition(lambda instance, env: spec)}


def harness(toolset: Toolset) -> Harness:
    return agent_spec(calling_model(), tools=[toolset]).harness


@pytest.fixture
async def memory() -> AsyncIterator[Store]:
    store = MemoryStore()
    yield store
    await store.close()


async def run(
    store: Store, agents: dict[str, AgentDefinition], text: str
) -> tuple[str, dict[str, Any]]:
    async with Runtime(agents, store, **FAST, clock=ManualClock()) as runtime:
        receipt = await runtime.dispatch("bot", "acme", text)
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
    return receipt.conversation_id, settled


async def outcomes(store: Store, conversation_id: str) -> list[ToolOutcome]:
    return [
        r.payload for r in await store.read(conversation_id) if isinstance(r.payload, ToolOutcome)
    ]


async def test_stdio_tools_are_offered_with_their_schemas_and_each_call_is_journaled(
    memory: Store, calls: Path
) -> None:
    model = calling_model()
    conversation, settled = await run(
        memory, bot(stdio(calls), model=model), 'tool:add {"a": 2, "b": 3}'
    )
    assert settled == {"status": "succeeded", "result": "answer: 5"}
    seen = ledger(calls)
    assert [(c["tool"], c["args"]) for c in seen] == [("add", {"a": 2, "b": 3})]
    # The model was offered the server's tools with the server's JSON schemas.
    offered = {t.name: t for t in model.calls[0].tools}
    assert set(offered) == {"add", "count", "note", "wipe", "hold", "crash"}
    assert offered["add"].parameters["properties"] == {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer"},
    }
    assert offered["add"].idempotent and not offered["note"].idempotent  # readOnlyHint
    records = [r.payload for r in await memory.read(conversation)]
    (listing,) = [p for p in records if isinstance(p, StepRecorded)]
    assert listing.name == "tether.toolset:calc"
    assert isinstance(listing.value, list) and len(listing.value) == 6
    (called,) = [p for p in records if isinstance(p, ToolCalled)]
    assert (called.tool, called.args) == ("add", {"a": 2, "b": 3})
    (outcome,) = await outcomes(memory, conversation)
    assert (outcome.content, outcome.data) == ("5", {"result": 5})
    # The run ended, and the server it started with it.
    assert not alive(int(str(seen[0]["pid"])))


async def test_a_parallel_batch_shares_the_runs_server(memory: Store, calls: Path) -> None:
    batch = [ToolUse("add", {"a": n, "b": n}, f"c{n}") for n in range(1, 4)]
    _, settled = await run(memory, bot(stdio(calls), Rule("batch", batch)), "batch")
    assert settled["result"] == "answer: 2 | 4 | 6"
    seen = ledger(calls)
    assert sorted(str(c["args"]) for c in seen) == sorted(str(c.args) for c in batch)
    assert len({c["pid"] for c in seen}) == 1  # one server for the run, opened once


async def test_replay_calls_no_mcp_server(memory: Store, calls: Path) -> None:
    conversation, settled = await run(memory, bot(stdio(calls)), 'tool:note {"text": "hi"}')
    assert settled["result"] == "answer: noted: hi"
    # The same agent, its server unreachable: the replay never asks it.
    gone = mcp(command=["/nonexistent/mcp-server"], name="calc")
    journal = await Journal.open(memory, conversation, fence=0)
    assert await journal.replay(harness(gone)) == ["answer: noted: hi"]
    assert len(ledger(calls)) == 1


async def test_a_server_that_dies_mid_call_leaves_an_unknown_outcome_and_is_started_again(
    memory: Store, calls: Path
) -> None:
    then = Rule("outcome is unknown", ToolUse("add", {"a": 1, "b": 1}), on="tool")
    conversation, settled = await run(memory, bot(stdio(calls), then), 'tool:crash {"text": "x"}')
    assert settled["status"] == "succeeded"
    crash, add = await outcomes(memory, conversation)
    assert crash.status is ToolOutcomeStatus.UNKNOWN and crash.is_error
    assert "outcome is unknown" in crash.content
    assert (add.status, add.content) == (ToolOutcomeStatus.OK, "2")
    seen = ledger(calls)
    assert [c["tool"] for c in seen] == ["crash", "add"]
    assert seen[0]["pid"] != seen[1]["pid"]  # a second process: the server was restarted
    assert not alive(int(str(seen[1]["pid"])))


async def test_an_idempotent_tool_is_called_again_after_the_server_died_under_it(
    memory: Store, calls: Path
) -> None:
    # ``crash`` declared idempotent: the call is made again, on a new server, which dies too;
    # the second failure is the result.
    conversation, settled = await run(
        memory, bot(stdio(calls, idempotent=["crash"])), 'tool:crash {"text": "x"}'
    )
    assert settled["status"] == "succeeded"
    (outcome,) = await outcomes(memory, conversation)
    assert outcome.status is ToolOutcomeStatus.ERROR and "Interrupted" in outcome.content
    assert [c["tool"] for c in ledger(calls)] == ["crash", "crash"]


async def test_a_call_past_its_timeout_is_unknown_and_its_server_stopped(
    memory: Store, calls: Path
) -> None:
    # ``hold`` never answers (nothing releases it): the timeout ends the wait, not the speed
    # of the machine.
    toolset = stdio(calls, timeout=1.0)
    conversation, settled = await run(memory, bot(toolset), 'tool:hold {"text": "x"}')
    assert settled["status"] == "succeeded", settled
    (outcome,) = await outcomes(memory, conversation)
    assert outcome.status is ToolOutcomeStatus.UNKNOWN and "did not answer" in outcome.content
    (held,) = ledger(calls)
    assert not alive(int(str(held["pid"])))


async def test_a_destructive_tool_waits_for_approval(memory: Store, calls: Path) -> None:
    agents = bot(stdio(calls))
    async with Runtime(agents, memory, **FAST, clock=ManualClock()) as runtime:
        receipt = await runtime.dispatch("bot", "acme", 'tool:wipe {"what": "db"}')
        request = await _approval(memory, receipt.conversation_id)
        assert request.tool == "wipe"
        assert ledger(calls) == []  # listed, not called
        await runtime.approve(request.approval_id, "approve", approver="ann")
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
    assert settled["result"] == "answer: wiped db"
    assert [c["tool"] for c in ledger(calls)] == ["wipe"]


async def test_approval_by_name_and_none(memory: Store, calls: Path) -> None:
    gated = stdio(calls, approval=["add"])
    agents = bot(gated)
    async with Runtime(agents, memory, **FAST, clock=ManualClock()) as runtime:
        receipt = await runtime.dispatch("bot", "acme", 'tool:add {"a": 1, "b": 2}')
        assert (await _approval(memory, receipt.conversation_id)).tool == "add"
    ungated = bot(stdio(calls, approval=False))
    _, settled = await run(MemoryStore(), ungated, 'tool:wipe {"what": "x"}')
    assert settled["result"] == "answer: wiped x"


async def _approval(store: Store, conversation_id: str) -> ApprovalRequested:
    async with asyncio.timeout(60):
        while True:
            for record in await store.read(conversation_id):
                if isinstance(record.payload, ApprovalRequested):
                    return record.payload
            await asyncio.sleep(0.02)  # polled: the run parks in the runtime's own task


async def test_a_server_whose_tools_changed_is_a_divergence(memory: Store, calls: Path) -> None:
    async with Runtime(
        bot(stdio(calls, approval=["note"])), memory, **FAST, clock=ManualClock()
    ) as runtime:
        receipt = await runtime.dispatch("bot", "acme", 'tool:note {"text": "hi"}')
        request = await _approval(memory, receipt.conversation_id)
    # The run parked, its listing recorded; the server then grew a tool.
    grown = stdio(calls, approval=["note"], env={"MCP_EXTRA_TOOL": "1"})
    async with Runtime(bot(grown), memory, **FAST, clock=ManualClock()) as runtime:
        decided: list[str] = []
        runtime.instrumentation.observers.append(
            lambda event: (
                decided.append(event.detail)
                if isinstance(event, RecoveryDecided) and event.decision == "version_diverged"
                else None
            )
        )
        await runtime.approve(request.approval_id, "approve", approver="ann")

        async def diverged() -> bool:
            submission = await memory.get_submission(receipt.submission_id)
            return submission.wait_reason == "version_diverged"

        await until_emitted(runtime, diverged)
    # The run waits for a fix, saying why; the approved note never reached the server.
    assert "'calc' changed its tools" in decided[0] and "added: extra" in decided[0]
    assert ledger(calls) == []


async def test_only_the_named_tools_under_a_prefix(memory: Store, calls: Path) -> None:
    model = calling_model()
    toolset = stdio(calls, tools=["add", "count"], prefix="calc_")
    _, settled = await run(memory, bot(toolset, model=model), 'tool:calc_add {"a": 1, "b": 2}')
    assert settled["result"] == "answer: 3"
    assert {t.name for t in model.calls[0].tools} == {"calc_add", "calc_count"}
    assert [(c["tool"], c["args"]) for c in ledger(calls)] == [("add", {"a": 1, "b": 2})]
    # Arguments that do not fit the server's schema never reach it.
    _, settled = await run(memory, bot(toolset), 'tool:calc_add {"a": "one", "b": 2}')
    assert "invalid arguments for calc_add: a: 'one' is not of type 'integer'" in str(
        settled["result"]
    )
    assert len(ledger(calls)) == 1


async def test_progress_notifications_reach_the_observers(memory: Store, calls: Path) -> None:
    progress: list[str] = []
    async with Runtime(bot(stdio(calls)), memory, **FAST, clock=ManualClock()) as runtime:
        runtime.instrumentation.observers.append(
            lambda event: progress.append(event.text) if isinstance(event, ToolProgress) else None
        )
        receipt = await runtime.dispatch("bot", "acme", 'tool:count {"n": 3}')
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
    assert settled["result"] == "answer: counted to 3"
    assert progress == ["counted 1", "counted 2", "counted 3"]


async def test_a_server_that_will_not_start_is_transient(memory: Store) -> None:
    toolset = mcp(command=["/nonexistent/mcp-server"], name="calc")
    spec = agent_spec(calling_model(), tools=[toolset])
    agents = {"bot": AgentDefinition(lambda instance, env: spec, max_attempts=2)}
    _, settled = await run(memory, agents, 'tool:add {"a": 1, "b": 2}')
    assert settled["status"] == "failed", settled
    assert "could not be opened" in str(settled), settled


def test_the_toolset_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        mcp()
    with pytest.raises(ValueError, match="exactly one"):
        mcp(command=["x"], url="http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError, match="non-empty list"):
        mcp(command="server")
    with pytest.raises(ValueError, match="approval"):
        mcp(command=["x"], approval="all")
    with pytest.raises(ValueError, match="toolset names"):
        agent_spec(calling_model(), tools=[mcp(command=["a"]), mcp(command=["b"])])


def test_changed_tools_name_what_changed() -> None:
    error = McpToolsChanged("calc", execution_id="e1", added=("x",), removed=("y",))
    assert error.code == "mcp_tools_changed" and error.differs == ("added: x", "removed: y")


def test_importing_tether_imports_no_mcp() -> None:
    code = "import sys, tether, tether.agent, tether.tools; sys.exit('mcp' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- over HTTP ---------------------------------------------------------------------------


@pytest.fixture(params=["http", "sse"])
def served(
    request: pytest.FixtureRequest, calls: Path
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The test server over streamable HTTP or SSE, on 127.0.0.1 at an ephemeral port."""
    env = {**os.environ, "MCP_LEDGER": str(calls)}
    process = start(
        [sys.executable, str(SERVER), request.param],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("PORT "), line
    path = "/sse" if request.param == "sse" else "/mcp"
    yield f"http://127.0.0.1:{int(line.split()[1])}{path}", process
    kill(process)


async def test_over_http_and_replayed_with_the_server_gone(
    memory: Store, calls: Path, served: tuple[str, subprocess.Popen[str]]
) -> None:
    url, process = served
    toolset = mcp(url=url, name="calc")
    conversation, settled = await run(memory, bot(toolset), 'tool:add {"a": 20, "b": 22}')
    assert settled == {"status": "succeeded", "result": "answer: 42"}
    assert [(c["tool"], c["args"]) for c in ledger(calls)] == [("add", {"a": 20, "b": 22})]
    kill(process)
    journal = await Journal.open(memory, conversation, fence=0)
    assert await journal.replay(harness(mcp(url=url, name="calc"))) == ["answer: 42"]


# --- a worker killed mid-call --------------------------------------------------------------

WORKER = Path(__file__).with_name("mcp_worker.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("idempotent", [False, True], ids=["not-idempotent", "idempotent"])
async def test_a_worker_killed_mid_call_leaves_no_server_and_recovery_honours_idempotence(
    tmp_path: Path, calls: Path, idempotent: bool
) -> None:
    release = tmp_path / "release"
    store = await SqliteStore.open(tmp_path)
    agents = mcp_worker.agents(calls, release, idempotent=idempotent)
    admission = Runtime(agents, store, **FAST)  # admission only: the worker process runs it
    await admission.start(worker=False)
    receipt = await admission.dispatch("bot", "acme", 'tool:hold {"text": "x"}')
    await admission.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (tmp_path / "worker.log").open("ab") as log:
        worker = start(
            [sys.executable, str(WORKER), str(tmp_path), str(calls), str(release)]
            + (["idempotent"] if idempotent else []),
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
    # The server has the call and holds it: kill the worker under it.
    (held,) = eventually(lambda: ledger(calls), lambda: (tmp_path / "worker.log").read_text())
    kill(worker)
    server = int(str(held["pid"]))
    eventually(lambda: not alive(server), "the MCP server outlived the worker that started it")
    release.touch()
    # Resumed here, once the dead worker's lease has run out: on the real clock, as the
    # worker's lease was taken on it.
    async with Runtime(agents, store, **FAST, clock=SystemClock()) as runtime:
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
    (outcome,) = await outcomes(store, receipt.conversation_id)
    seen = [c["tool"] for c in ledger(calls)]
    if idempotent:  # called again, on a new server, which answered
        assert (outcome.status, outcome.content) == (ToolOutcomeStatus.OK, "held: x")
        assert seen == ["hold", "hold"]
    else:  # never called again: its outcome is unknown
        assert outcome.status is ToolOutcomeStatus.UNKNOWN
        assert seen == ["hold"]
    assert settled["status"] == "succeeded"
    await store.close()
    assert all(not alive(int(str(c["pid"]))) for c in ledger(calls))
