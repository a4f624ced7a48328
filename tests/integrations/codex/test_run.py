"""``run_codex`` and the harness over a fake ``codex`` on PATH (a script that prints a
captured run): the command line, the prompt on stdin, exit statuses, a missing CLI, a reader
that stops early, and a thread continued by its next message with its own usage."""

from collections.abc import Callable
from contextlib import aclosing
from pathlib import Path

import pytest

from tether.engine import Runtime
from tether.integrations.codex import CodexFailed, codex_argv, durable, run_codex
from tether.stream import UnifiedEmitter

from ...engine.test_runtime import settle
from ..claude_code.support import (
    CODEX_FIXTURES,
    collect,
    fake_cli,
    gone,
    lines,
    logical,
    on_path,
    recorded,
    runs,
)
from .test_durable import tap_of

pytestmark = pytest.mark.timeout(60)

Make = Callable[..., Runtime]


async def test_the_cli_runs_on_path_with_the_prompt_on_stdin(tmp_path: Path) -> None:
    codex = fake_cli(tmp_path / "bin", "codex", CODEX_FIXTURES / "command.jsonl")
    turn = run_codex(
        "-h is a prompt, not an option",
        model="gpt-5.5",
        args=["--sandbox", "workspace-write"],
        env=on_path(tmp_path / "bin"),
        cwd=tmp_path,
    )
    said, whole = await tap_of("command")
    assert logical(await collect(turn.events)) == said
    assert runs(codex) == [
        ["exec", "--json", "--model", "gpt-5.5", "--sandbox", "workspace-write", "-"]
    ]
    assert recorded(codex, "stdin") == "-h is a prompt, not an option"
    assert turn.failure is None and turn.usage() == whole.usage()


def test_the_command_line_of_a_resumed_thread() -> None:
    assert codex_argv(resume="t1", args=["--skip-git-repo-check"]) == [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "resume",
        "t1",
        "-",
    ]


async def test_exit_statuses_and_a_missing_cli(tmp_path: Path) -> None:
    fake_cli(tmp_path / "bin", "codex", CODEX_FIXTURES / "api_error.jsonl", exit_code=1)
    turn = run_codex("hi", env=on_path(tmp_path / "bin"))
    await collect(turn.events)
    assert turn.failure == "fake: the model is not available"  # what the turn said comes first
    fake_cli(tmp_path / "bin", "codex", CODEX_FIXTURES / "interrupted.jsonl", exit_code=130)
    turn = run_codex("hi", env=on_path(tmp_path / "bin"))
    await collect(turn.events)
    assert turn.failure == "codex exited with status 130"
    missing = run_codex("hi", env={"PATH": str(tmp_path / "nowhere")})
    with pytest.raises(FileNotFoundError, match="npm install -g @openai/codex"):
        await collect(missing.events)


async def test_a_reader_that_stops_early_ends_the_cli(tmp_path: Path) -> None:
    codex = fake_cli(tmp_path / "bin", "codex", CODEX_FIXTURES / "command.jsonl", then_sleep=True)
    turn = run_codex("hi", env=on_path(tmp_path / "bin"), terminate_grace=30)
    async with aclosing(UnifiedEmitter().yield_turn(turn)) as events:
        async for _ in events:
            break
    assert turn.process is not None and turn.process.returncode is not None
    assert turn.process.returncode < 0 and gone(int(recorded(codex, "pid")))


async def test_a_thread_continues_with_each_runs_own_usage_and_a_failure_fails(
    make_runtime: Make, tmp_path: Path
) -> None:
    codex = fake_cli(tmp_path / "bin", "codex", CODEX_FIXTURES / "text.jsonl")
    agents = {"coder": durable(executable=str(codex), args=["--skip-git-repo-check"])}
    async with make_runtime(agents) as runtime:
        first = await runtime.dispatch("coder", "me", "Say hello.")
        assert (await settle(runtime, first.submission_id))["result"] == "Hello! How can I help?"
        fake_cli(tmp_path / "bin", "codex", CODEX_FIXTURES / "resumed.jsonl")
        second = await runtime.dispatch("coder", "me", "And again.")
        await settle(runtime, second.submission_id)
        fake_cli(tmp_path / "bin", "codex", CODEX_FIXTURES / "api_error.jsonl", exit_code=1)
        third = await runtime.dispatch("coder", "me", "Once more.")
        failed = await settle(runtime, third.submission_id)
        records = await runtime.records(second.conversation_id)
        ledger = [
            await runtime.usage(first.conversation_id, submission_id=receipt.submission_id)
            for receipt in (first, second)
        ]
    thread = lines(CODEX_FIXTURES / "text.jsonl")[0].split('"thread_id":"')[1].split('"')[0]
    argv = runs(codex)
    assert argv[0][-2:] == ["--skip-git-repo-check", "-"]
    assert argv[1][-4:] == ["--skip-git-repo-check", "resume", thread, "-"]
    usages = [
        r.payload.value  # type: ignore[attr-defined]
        for r in records
        if r.kind == "step_recorded" and r.payload.name == "tether.turn_usage"  # type: ignore[attr-defined]
    ]
    # Codex counts the thread: the second run's own share is what it added to the first's.
    assert [u["input_tokens"] for u in usages[:2]] == [2400, 4801 - 2400]
    assert [u["output_tokens"] for u in usages[:2]] == [60, 121 - 60]
    # ... and that share is what the usage ledger counts for each submission.
    assert [(u.input_tokens, u.output_tokens) for u in ledger] == [(2400, 60), (2401, 61)]
    assert [u.cache_read_tokens for u in ledger] == [u["cached_input_tokens"] for u in usages[:2]]
    assert failed["status"] == "failed"
    assert CodexFailed.__name__ in str(failed["error"])
    assert "fake: the model is not available" in str(failed["error"])
