"""A pydantic-ai agent's own MCP toolsets (``pydantic_ai.mcp.MCPToolset``, on fastmcp) under
``durable()``: a real MCP server (written with the SDK: tests/tools/mcp_server.py) over stdio
and streamable HTTP on 127.0.0.1, and pydantic-ai's OpenAI model over HTTP to the fake OpenAI
API. Each listing is a step, each call a journaled tool call, a replay connects to no server,
a destructive tool waits for an approval, and a server whose tools changed is a divergence."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tether.engine import Runtime, SystemClock
from tether.errors import McpToolsChanged
from tether.integrations.pydantic_ai import McpPolicy, PydanticAIHarness, durable
from tether.journal import Decision, Journal
from tether.messages import ToolOutcomeStatus
from tether.records import StepRecorded, ToolOutcome
from tether.store import MemoryStore, SqliteStore, Store
from tether.testing import copy_prefix

from ...engine.conftest import FAST
from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from ...processes import eventually, kill, start
from ...tools.mcp_support import SERVER, alive, ledger
from ..approvals import decide_parked
from ..cuts import replay_sends_nothing, resume_over_http_from_every_cut
from ..doc_examples import memory_only, run_example
from . import mcp_worker
from .test_docs import MCP, PAGE

pytestmark = pytest.mark.process

Make = Callable[..., Runtime]


def stdio(calls: Path | None, *, extra: bool = False) -> MCPToolset[Any]:
    env = {"MCP_LEDGER": str(calls)} if calls is not None else {}
    if extra:
        env["MCP_EXTRA_TOOL"] = "1"
    return MCPToolset(StdioTransport(sys.executable, [str(SERVER), "stdio"], env=env))


def never_started() -> MCPToolset[Any]:
    """A server that cannot start: a replay that tried to connect would fail."""
    return MCPToolset(StdioTransport("/nonexistent/mcp-server", []))


def agent(fake: FakeOpenAI, toolset: MCPToolset[Any]) -> Agent[None, str]:
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=fake.url, api_key="fake"))
    return Agent(model, toolsets=[toolset])


async def ask(runtime: Runtime, text: str) -> tuple[str, Any]:
    receipt = await runtime.dispatch("calc", "me", text)
    return receipt.conversation_id, (await settle(runtime, receipt.submission_id))["result"]


def listings(records: list[Any], server: str = "mcp0") -> list[Any]:
    """The listings of ``server`` the run recorded (no other step may list one)."""
    steps = [r.payload for r in records if isinstance(r.payload, StepRecorded)]
    listed = [s for s in steps if s.name.startswith("pydantic_ai.mcp_tools:")]
    assert {s.name for s in listed} == {f"pydantic_ai.mcp_tools:{server}"}
    return [s.value for s in listed]


async def test_stdio_mcp_tools_are_journaled_and_replayed_without_the_server(
    fake: FakeOpenAI, make_runtime: Make, store: Store, tmp_path: Path
) -> None:
    calls = tmp_path / "ledger.jsonl"
    fake.add(Answer(calls=(Call("add", {"a": 2, "b": 3}),)), Answer(text="it is 5"))
    async with make_runtime({"calc": durable(agent(fake, stdio(calls)))}) as runtime:
        conversation_id, result = await ask(runtime, "add 2 and 3")
        records = await runtime.records(conversation_id)
    assert result == "it is 5"
    assert [(c["tool"], c["args"]) for c in ledger(calls)] == [("add", {"a": 2, "b": 3})]
    kinds = [r.kind for r in records]
    assert kinds.count("tool_called") == kinds.count("tool_outcome") == 1
    listed = listings(records)
    assert len(listed) == 2  # one listing per step of pydantic-ai's loop
    assert all({"add", "note", "wipe"} <= {t["name"] for t in v} for v in listed)
    outcome = next(r.payload for r in records if isinstance(r.payload, ToolOutcome))
    assert outcome.content == "5"
    replayed = await replay_sends_nothing(
        store, fake, conversation_id, PydanticAIHarness(agent(fake, never_started()))
    )
    assert replayed == ["it is 5"]
    assert len(ledger(calls)) == 1


@pytest.fixture
def served(calls: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The test server over streamable HTTP on 127.0.0.1, at an ephemeral port."""
    process = start(
        [sys.executable, str(SERVER), "http"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "MCP_LEDGER": str(calls)},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("PORT "), line
    yield f"http://127.0.0.1:{int(line.split()[1])}/mcp", process
    kill(process)


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    return tmp_path / "ledger.jsonl"


@memory_only
async def test_streamable_http_mcp_tools_are_journaled_and_replayed_with_the_server_gone(
    fake: FakeOpenAI,
    make_runtime: Make,
    store: Store,
    calls: Path,
    served: tuple[str, subprocess.Popen[str]],
) -> None:
    url, process = served
    fake.add(Answer(calls=(Call("add", {"a": 20, "b": 22}),)), Answer(text="42"))
    toolset = MCPToolset(url, id="calc")  # the step's name: not the host's, which may move
    async with make_runtime({"calc": durable(agent(fake, toolset))}) as runtime:
        conversation_id, result = await ask(runtime, "add 20 and 22")
        records = await runtime.records(conversation_id)
    assert result == "42"
    assert [(c["tool"], c["args"]) for c in ledger(calls)] == [("add", {"a": 20, "b": 22})]
    assert len(listings(records, "calc")) == 2
    kill(process)  # a replay reaches no server: there is none
    harness = PydanticAIHarness(agent(fake, MCPToolset(url, id="calc")))
    assert await replay_sends_nothing(store, fake, conversation_id, harness) == ["42"]
    assert len(ledger(calls)) == 1


@memory_only
async def test_a_resume_from_every_cut_calls_again_only_a_tool_its_hints_say_is_idempotent(
    fake: FakeOpenAI, make_runtime: Make, store: Store, calls: Path
) -> None:
    answers = (Answer(calls=(Call("add", {"a": 1, "b": 1}),)), Answer(text="it is 2"))
    fake.add(*answers)
    async with make_runtime({"calc": durable(agent(fake, stdio(calls)))}) as runtime:
        conversation_id, result = await ask(runtime, "add")
        records = await runtime.records(conversation_id)
    assert result == "it is 2"
    await resume_over_http_from_every_cut(
        store,
        fake,
        conversation_id,
        "it is 2",
        answers,
        lambda: PydanticAIHarness(agent(fake, stdio(calls))),
    )
    # add is readOnlyHint: every resume from a cut before its outcome called it (again).
    seqs = {r.kind: r.seq for r in reversed(records)}  # each kind's first seq
    resumed = seqs["tool_outcome"] - seqs["user_message"]
    assert [c["tool"] for c in ledger(calls)] == ["add"] * (1 + resumed)


@memory_only
@pytest.mark.parametrize(
    ("tool", "policy", "decision", "expected"),
    [
        ("wipe", McpPolicy(), "approve", ["wipe"]),  # destructiveHint
        ("wipe", McpPolicy(), "reject", []),
        ("note", McpPolicy(approval=["note"]), "approve", ["note"]),  # by name
    ],
)
async def test_an_mcp_tool_waits_for_an_approval_by_annotation_or_by_name(
    fake: FakeOpenAI,
    make_runtime: Make,
    store: Store,
    calls: Path,
    tool: str,
    policy: McpPolicy,
    decision: Decision,
    expected: list[str],
) -> None:
    args = {"what": "logs"} if tool == "wipe" else {"text": "logs"}
    fake.add(Answer(calls=(Call(tool, args),)), Answer(text="done"))
    definition = durable(agent(fake, stdio(calls)), mcp=policy)
    async with make_runtime({"calc": definition}) as runtime:
        receipt = await runtime.dispatch("calc", "me", f"{tool} the logs")
        gated, result = await decide_parked(runtime, store, receipt, decision, None)
    assert gated == args
    assert result == "done"
    assert [c["tool"] for c in ledger(calls)] == expected
    outcome = next(
        r.payload
        for r in await store.read(receipt.conversation_id)
        if isinstance(r.payload, ToolOutcome)
    )
    denied = ToolOutcomeStatus.DENIED if decision == "reject" else ToolOutcomeStatus.OK
    assert outcome.status is denied


@memory_only
async def test_a_tool_not_named_for_approval_runs_at_once(
    fake: FakeOpenAI, make_runtime: Make, store: Store, calls: Path
) -> None:
    fake.add(Answer(calls=(Call("wipe", {"what": "logs"}),)), Answer(text="done"))
    definition = durable(agent(fake, stdio(calls)), mcp=McpPolicy(approval=False))
    async with make_runtime({"calc": definition}) as runtime:
        _, result = await ask(runtime, "wipe the logs")
    assert result == "done"
    assert [c["tool"] for c in ledger(calls)] == ["wipe"]


@memory_only
async def test_a_server_that_changed_its_tools_is_a_divergence_on_resume(
    fake: FakeOpenAI, make_runtime: Make, store: Store, calls: Path
) -> None:
    fake.add(Answer(calls=(Call("add", {"a": 2, "b": 3}),)), Answer(text="it is 5"))
    async with make_runtime({"calc": durable(agent(fake, stdio(calls)))}) as runtime:
        conversation_id, _ = await ask(runtime, "add 2 and 3")
    records = await store.read(conversation_id)
    second = [r.seq for r in records if isinstance(r.payload, StepRecorded)][1]
    crashed = MemoryStore()
    await copy_prefix(store, conversation_id, second - 1, crashed)  # died before listing again
    fake.add(Answer(text="it is 5"))
    journal = await Journal.open(crashed, conversation_id)
    with pytest.raises(McpToolsChanged) as raised:  # restarted: the server grew a tool
        await journal.resume(PydanticAIHarness(agent(fake, stdio(calls, extra=True))))
    assert (raised.value.server, raised.value.added) == ("mcp0", ("extra",))
    assert raised.value.removed == raised.value.changed == ()


@memory_only
async def test_a_toolset_that_adds_the_servers_instructions_is_refused(
    fake: FakeOpenAI, make_runtime: Make, tmp_path: Path
) -> None:
    toolset = MCPToolset(StdioTransport("/nonexistent/mcp-server", []), include_instructions=True)
    async with make_runtime({"calc": durable(agent(fake, toolset))}) as runtime:
        receipt = await runtime.dispatch("calc", "me", "hi")
        settled = await settle(runtime, receipt.submission_id)
    assert settled["status"] == "failed", settled
    error = str(settled["error"])
    assert error.startswith("UnsupportedConstruct: ") and "include_instructions" in error, error
    assert fake.count == 0


def test_importing_the_integration_imports_no_mcp_client() -> None:
    code = (
        "import sys, tether.integrations.pydantic_ai; "
        "sys.exit(any(m in sys.modules for m in ('fastmcp', 'mcp', 'pydantic_ai.mcp')))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


WORKER = Path(__file__).with_name("mcp_worker.py")
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("idempotent", [False, True], ids=["not-idempotent", "idempotent"])
async def test_a_worker_killed_mid_mcp_call_recovers_as_its_idempotence_says(
    fake: FakeOpenAI, tmp_path: Path, calls: Path, idempotent: bool
) -> None:
    release = tmp_path / "release"
    store = await SqliteStore.open(tmp_path)
    definitions = mcp_worker.agents(fake.url, calls, release, idempotent=idempotent)
    admission = Runtime(definitions, store, **FAST)  # admission only: the worker runs it
    await admission.start(worker=False)
    receipt = await admission.dispatch("calc", "me", "hold x")
    await admission.close()
    fake.add(Answer(calls=(Call("hold", {"text": "x"}),)))
    argv = [sys.executable, str(WORKER), str(tmp_path), fake.url, str(calls), str(release)]
    with (tmp_path / "worker.log").open("ab") as log:
        worker = start(
            argv + (["idempotent"] if idempotent else []),
            stdout=subprocess.DEVNULL,
            stderr=log,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    # The server has the call and holds it: kill the worker under it.
    (held,) = eventually(lambda: ledger(calls), lambda: (tmp_path / "worker.log").read_text())
    kill(worker)
    release.touch()
    server = int(str(held["pid"]))
    eventually(lambda: not alive(server), "the MCP server outlived the worker that started it")
    fake.add(Answer(text="done"))
    # Resumed here, once the dead worker's lease has run out: on the real clock, as the
    # worker's lease was taken on it.
    async with Runtime(definitions, store, **FAST, clock=SystemClock()) as runtime:
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
    assert settled["status"] == "succeeded"
    (outcome,) = [
        r.payload
        for r in await store.read(receipt.conversation_id)
        if isinstance(r.payload, ToolOutcome)
    ]
    seen = [c["tool"] for c in ledger(calls)]
    if idempotent:  # called again, on a new server, which answered
        assert (outcome.status, outcome.content) == (ToolOutcomeStatus.OK, "held: x")
        assert seen == ["hold", "hold"]
    else:  # never called again: its outcome is unknown, and the model read that
        assert outcome.status is ToolOutcomeStatus.UNKNOWN
        assert seen == ["hold"]
        assert "unknown" in fake.requests[-1].conversation
    await store.close()


@memory_only
async def test_the_docs_mcp_example_runs(
    fake: FakeOpenAI, store: Store, calls: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fake.add(Answer(calls=(Call("add", {"a": 2, "b": 3}),)), Answer(text="5"))
    namespace: dict[str, Any] = {
        "toolset": stdio(calls),
        "store": store,
        "Runtime": Runtime,
        "durable": durable,
        "Agent": Agent,
        "McpPolicy": McpPolicy,
    }
    # capfd: the stdio server's stderr needs a real file descriptor, which capsys has not.
    await run_example(PAGE.example(MCP), namespace)
    assert capfd.readouterr().out == "5\n"
    assert [c["tool"] for c in ledger(calls)] == ["add"]
