"""An Agents SDK agent's MCP servers under ``durable()``: a real MCP server (written with the
SDK: tests/tools/mcp_server.py) over stdio, through the SDK's own ``MCPServerStdio``. The
listing is a step, each call a journaled tool call, and a replay asks no server."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent
from agents.mcp import MCPServerStdio

from tether.engine import Runtime
from tether.errors import McpToolsChanged
from tether.integrations.openai_agents import OpenAIAgentsHarness, durable
from tether.journal import Journal
from tether.records import StepRecorded
from tether.store import MemoryStore, Store
from tether.testing import copy_prefix

from ...fakes.openai_server import Answer, Call, FakeOpenAI
from ...tools.mcp_support import SERVER, ledger
from .. import cuts
from ..doc_examples import run_example
from .over_http import MODEL, replay_sends_nothing, run_durably
from .test_docs import MCP, PAGE

pytestmark = pytest.mark.process

Make = Callable[..., Runtime]


def calculator(calls: Path | None, *, extra: bool = False) -> MCPServerStdio:
    env = {"MCP_LEDGER": str(calls)} if calls is not None else {}
    if extra:
        env["MCP_EXTRA_TOOL"] = "1"  # a server that grew a tool
    return MCPServerStdio(
        params={"command": sys.executable, "args": [str(SERVER), "stdio"], "env": env},
        name="calc",
    )


def helper(server: MCPServerStdio) -> Callable[[], Agent[Any]]:
    return lambda: Agent(name="helper", model=MODEL, mcp_servers=[server])


async def test_mcp_tools_are_journaled_and_replayed_without_the_server(
    fake: FakeOpenAI, make_runtime: Make, store: Store, tmp_path: Path
) -> None:
    calls = tmp_path / "ledger.jsonl"
    fake.add(Answer(calls=(Call("add", {"a": 2, "b": 3}),)), Answer(text="it is 5"))
    async with calculator(calls) as server:  # the application connects it, as the SDK asks
        run = await run_durably(make_runtime, helper(server), "add 2 and 3")
    assert run.result == "it is 5"
    assert [(c["tool"], c["args"]) for c in ledger(calls)] == [("add", {"a": 2, "b": 3})]
    kinds = run.kinds()
    assert kinds.count("tool_called") == kinds.count("tool_outcome") == 1
    steps = [r.payload for r in run.records if r.kind == "step_recorded"]
    listed = [getattr(s, "value", None) for s in steps]
    assert all(isinstance(v, list) and "add" in {t["name"] for t in v} for v in listed)
    assert len(listed) == 2  # one listing per turn of the SDK's loop
    outcome = next(r.payload for r in run.records if r.kind == "tool_outcome")
    assert outcome.content == '{"type": "text", "text": "5"}'  # type: ignore[attr-defined]
    # A replay with the server never connected: nothing is listed, nothing called, nothing sent.
    replayed = await replay_sends_nothing(
        store, fake, run.conversation_id, helper(calculator(None))
    )
    assert replayed == ["it is 5"]
    assert len(ledger(calls)) == 1


async def test_a_resume_from_every_cut_reruns_only_an_idempotent_mcp_call(
    fake: FakeOpenAI, make_runtime: Make, store: Store, tmp_path: Path
) -> None:
    calls = tmp_path / "ledger.jsonl"
    answers = (Answer(calls=(Call("add", {"a": 1, "b": 1}),)), Answer(text="it is 2"))
    fake.add(*answers)
    async with calculator(calls) as server:
        run = await run_durably(make_runtime, helper(server), "add", idempotent_tools=["add"])
        assert run.result == "it is 2"
        await cuts.resume_over_http_from_every_cut(
            store,
            fake,
            run.conversation_id,
            "it is 2",
            answers,
            lambda: OpenAIAgentsHarness(helper(server)(), name="agent", idempotent_tools=["add"]),
        )
    # Each resume from a cut before the call's outcome called the server once (live, or
    # again: the tool is idempotent); none from a cut after it.
    resumed = 0
    if isinstance(store, MemoryStore):
        seqs = {r.kind: r.seq for r in reversed(run.records)}  # each kind's first seq
        resumed = seqs["tool_outcome"] - seqs["user_message"]
    assert [c["tool"] for c in ledger(calls)] == ["add"] * (1 + resumed)


async def test_the_docs_mcp_example_runs(
    fake: FakeOpenAI, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = tmp_path / "ledger.jsonl"
    fake.add(Answer(calls=(Call("add", {"a": 2, "b": 3}),)), Answer(text="5"))
    namespace: dict[str, Any] = {
        "server": calculator(calls),
        "store": store,
        "Runtime": Runtime,
        "durable": durable,
        "Agent": Agent,
    }
    await run_example(PAGE.example(MCP), namespace)
    assert capsys.readouterr().out == "5\n"
    assert [c["tool"] for c in ledger(calls)] == ["add"]


async def test_a_server_that_changed_its_tools_is_a_divergence_on_resume(
    fake: FakeOpenAI, make_runtime: Make, store: Store, tmp_path: Path
) -> None:
    calls = tmp_path / "ledger.jsonl"
    fake.add(Answer(calls=(Call("add", {"a": 2, "b": 3}),)), Answer(text="it is 5"))
    async with calculator(calls) as server:
        run = await run_durably(make_runtime, helper(server), "add 2 and 3")
    second = [r.seq for r in run.records if isinstance(r.payload, StepRecorded)][1]
    crashed = MemoryStore()
    await copy_prefix(store, run.conversation_id, second - 1, crashed)  # died before listing
    fake.add(Answer(text="it is 5"))
    journal = await Journal.open(crashed, run.conversation_id)
    async with calculator(calls, extra=True) as grown:  # restarted: the server grew a tool
        with pytest.raises(McpToolsChanged) as raised:
            await journal.resume(OpenAIAgentsHarness(helper(grown)(), name="agent"))
    assert (raised.value.server, raised.value.added) == ("helper", ("extra",))
