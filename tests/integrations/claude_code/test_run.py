"""``run_claude_code`` and the harness over a fake ``claude`` on PATH (a script that prints a
captured run): the command line, the prompt on stdin, exit statuses, a missing CLI, a reader
that stops early, and a session continued by its next message."""

import asyncio
from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path

import pytest

from tether.engine import BUDGET_EXHAUSTED, Runtime, TenantBudget
from tether.integrations.claude_code import (
    ClaudeCodeFailed,
    claude_code_argv,
    durable,
    run_claude_code,
)
from tether.stream import UnifiedEmitter

from ...engine.test_runtime import settle
from .support import (
    CLAUDE_FIXTURES,
    collect,
    fake_cli,
    gone,
    lines,
    logical,
    on_path,
    recorded,
    runs,
    wait_gone,
)
from .test_durable import tap_of

pytestmark = pytest.mark.timeout(60)

Make = Callable[..., Runtime]


async def test_the_cli_runs_on_path_with_the_prompt_on_stdin(tmp_path: Path) -> None:
    claude = fake_cli(tmp_path / "bin", "claude", CLAUDE_FIXTURES / "tool.jsonl")
    turn = run_claude_code(
        "--help is not an option here",
        model="claude-sonnet-4-5",
        partial_messages=True,
        args=["--allowedTools", "Bash(echo:*)"],
        env=on_path(tmp_path / "bin"),
        cwd=tmp_path,
    )
    said, whole = await tap_of("tool")
    assert logical(await collect(turn.events)) == said
    assert runs(claude) == [
        [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--model",
            "claude-sonnet-4-5",
            "--allowedTools",
            "Bash(echo:*)",
        ]
    ]
    assert recorded(claude, "stdin") == "--help is not an option here"
    assert turn.process is not None and turn.process.returncode == 0
    assert turn.failure is None and turn.usage() == whole.usage()
    with pytest.raises(RuntimeError, match="read once"):
        await collect(turn.events)  # a run is not started twice


def test_the_command_line() -> None:
    assert claude_code_argv(resume="s1", executable="/opt/claude") == [
        "/opt/claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--resume",
        "s1",
    ]


async def test_a_non_zero_exit_is_a_failure_with_the_cli_s_last_word(tmp_path: Path) -> None:
    fake_cli(
        tmp_path / "bin",
        "claude",
        CLAUDE_FIXTURES / "terminated.jsonl",
        exit_code=3,
        stderr="Error: something broke",
    )
    turn = run_claude_code("hi", env=on_path(tmp_path / "bin"))
    events = await collect(turn.events)
    assert logical(events) == [("text", "Here is the first part of a long answer, and then")]
    assert turn.failure == "claude exited with status 3: Error: something broke"
    assert turn.process is not None and "something broke" in turn.process.stderr


async def test_a_missing_cli_fails_when_read_not_when_built(tmp_path: Path) -> None:
    turn = run_claude_code("hi", env={"PATH": str(tmp_path)})  # nothing there
    with pytest.raises(FileNotFoundError, match="npm install -g @anthropic-ai/claude-code"):
        await collect(turn.events)


async def test_a_reader_that_stops_early_ends_the_cli_and_what_it_started(
    tmp_path: Path,
) -> None:
    claude = fake_cli(tmp_path / "bin", "claude", CLAUDE_FIXTURES / "tool.jsonl", then_sleep=True)
    turn = run_claude_code("hi", env=on_path(tmp_path / "bin"), terminate_grace=30)
    async with aclosing(UnifiedEmitter().yield_turn(turn)) as events:
        async for event in events:
            assert event.type == "start"  # the thinking block's
            break
    assert turn.process is not None and turn.process.returncode is not None
    assert turn.process.returncode < 0  # ended by a signal
    assert gone(int(recorded(claude, "pid")))
    if started_child(claude):  # the fake may not have reached its sleep before the stop
        # SIGTERM went to the process group: the CLI's own child is ended too.
        assert await asyncio.to_thread(wait_gone, int(recorded(claude, "child")))


def started_child(script: Path) -> bool:
    return Path(f"{script}.child").exists()


async def test_a_session_continues_and_a_failed_run_fails_the_submission(
    make_runtime: Make, tmp_path: Path
) -> None:
    claude = fake_cli(tmp_path / "bin", "claude", CLAUDE_FIXTURES / "text.jsonl")
    agents = {"coder": durable(executable=str(claude), args=["--max-turns", "3"])}
    async with make_runtime(agents) as runtime:
        first = await runtime.dispatch("coder", "me", "Say hello.")
        assert (await settle(runtime, first.submission_id))["result"] == "Hello! How can I help?"
        second = await runtime.dispatch("coder", "me", "And again.")
        await settle(runtime, second.submission_id)
        fake_cli(tmp_path / "bin", "claude", CLAUDE_FIXTURES / "max_turns.jsonl")
        third = await runtime.dispatch("coder", "me", "Look around.")
        failed = await settle(runtime, third.submission_id)
    session = lines(CLAUDE_FIXTURES / "text.jsonl")[0].split('"session_id":"')[1].split('"')[0]
    argv = runs(claude)
    assert "--resume" not in argv[0]
    # the id the previous run left in the log, then the harness's own options
    assert argv[1][-4:] == argv[2][-4:] == ["--resume", session, "--max-turns", "3"]
    assert failed["status"] == "failed"
    assert ClaudeCodeFailed.__name__ in str(failed["error"])
    assert "error_max_turns: Reached maximum number of turns (1)" in str(failed["error"])


async def test_the_runs_tokens_and_cost_count_in_the_usage_ledger_and_the_budgets(
    make_runtime: Make, tmp_path: Path
) -> None:
    """The CLI's own count (6501 prompt tokens, 41 out, $0.006843) lands on the run's last
    completion: the session's usage, the tenant's ledger and a tenant budget count it."""
    claude = fake_cli(tmp_path / "bin", "claude", CLAUDE_FIXTURES / "text.jsonl")
    agents = {"coder": durable(executable=str(claude))}
    budgets = {"acme": TenantBudget(tokens=1000)}
    async with make_runtime(agents, tenant_budgets=budgets) as runtime:
        first = await runtime.dispatch("coder", "me", "Say hello.", tenant="acme")
        assert (await settle(runtime, first.submission_id))["status"] == "succeeded"
        usage = await runtime.usage(first.conversation_id)
        assert (usage.calls, usage.input_tokens, usage.output_tokens) == (1, 6501, 41)
        assert usage.cache_read_tokens == 5000
        assert usage.cost == pytest.approx(0.006843)  # the CLI's price, not a table's
        ledger = await runtime.tenant_usage("acme")
        assert (ledger.spent.model_calls, ledger.spent.tokens) == (1, 6542)
        assert ledger.spent.cost_usd == pytest.approx(0.006843)
        second = await runtime.dispatch("coder", "you", "Say hello.", tenant="acme")
        refused = await settle(runtime, second.submission_id)
    assert refused["errorCode"] == BUDGET_EXHAUSTED, refused
