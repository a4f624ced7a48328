"""``tether fork --at N`` says when N fell between a tool call and its result."""

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from tether.cli import app
from tether.engine import Runtime

from ..engine.agents import loop_agent


async def _session(url: str) -> tuple[str, int, str]:
    """A session with one tool call: its conversation, and the seq and id of the call."""
    async with Runtime({"loop": loop_agent()}, url, claim_interval=0.02) as runtime:
        receipt = await runtime.dispatch("loop", "acme", "lookup")
        await runtime.wait(receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    called = next(r for r in records if r.kind == "tool_called")
    call_id = str(called.payload.to_json_object()["callId"])
    return receipt.conversation_id, called.seq, call_id


def test_fork_at_a_tool_call_says_it_repaired_the_cut(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'data'}"
    conversation, seq, call_id = asyncio.run(_session(url))
    runner = CliRunner()
    cut = runner.invoke(app, ["fork", conversation, "--at", str(seq), "--store", url])
    assert cut.exit_code == 0, cut.output
    assert cut.output.startswith("forked: ")
    note = " ".join(cut.output.split())
    assert f"record {seq} falls between a tool call and its result" in note
    assert f"the fork gave {call_id} an interrupted result" in note
    clean = runner.invoke(app, ["fork", conversation, "--at", str(seq + 1), "--store", url])
    assert clean.exit_code == 0 and "falls between" not in clean.output, clean.output
