"""Codex as a Tether agent: one ``codex exec --json`` run per execution, written into the
session's log by ``auto_send_turn``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from tether.engine import AgentDefinition
from tether.integrations._bridge import durable_definition
from tether.integrations._cli import CliHarness, CliRun
from tether.integrations.codex._run import run_codex
from tether.stream import SpanSink, TurnUsage

__all__ = ("CodexFailed", "CodexHarness", "durable")

THREAD_KEY = "tether.codex"
"""The data part under which a run leaves its Codex thread id (and the thread's token
count so far) in the transcript."""
OUTCOME_STEP = "tether.codex.outcome"
"""The step that records how a run ended (its thread, failure and exit status)."""

_COUNTS = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")


class CodexFailed(RuntimeError):
    """The CLI run failed: ``turn.failed``, a non-zero exit, or a stream that ended before
    ``turn.completed``. The run's output up to there is in the log all the same."""


def _since(usage: TurnUsage, before: JsonValue) -> TurnUsage:
    """This run's share of a resumed thread's running token count."""
    if not isinstance(before, dict):
        return usage
    update: dict[str, int] = {}
    for name in _COUNTS:
        now, then = getattr(usage, name), before.get(name)
        if isinstance(now, int) and isinstance(then, int) and now >= then:
            update[name] = now - then
    if "input_tokens" in update and "output_tokens" in update:
        update["total_tokens"] = update["input_tokens"] + update["output_tokens"]
    return usage.model_copy(update=update)


class CodexHarness(CliHarness):
    """Runs ``codex exec --json`` once per execution on the execution's input, and writes
    the run into the session's log with
    :meth:`~tether.stream.UnifiedEmitter.auto_send_turn`: its messages, reasoning,
    commands, file changes and MCP tool calls stream as records (SSE shows them live),
    stay across restarts, and replay with no CLI (a replay never starts it).

    With ``resume_thread`` (the default) a session's later messages continue the same
    Codex thread (``codex exec resume``, the id the previous run left in the transcript),
    so Codex keeps its context; its session files must still be in its ``CODEX_HOME``. The
    usage recorded is each run's own (Codex counts the whole thread).

    A crash mid-run cannot resume the CLI in the middle: the resumed execution keeps what
    was recorded and runs the CLI again from the start. A run that fails raises
    :class:`CodexFailed` (the submission fails; the error is also in the stream).

    Example::

        harness = CodexHarness(args=["--sandbox", "workspace-write"], cwd="/srv/repo")
    """

    name = "codex"
    marker_key = THREAD_KEY
    outcome_step = OUTCOME_STEP
    failed = CodexFailed

    def __init__(
        self,
        *,
        model: str | None = None,
        args: Sequence[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        executable: str = "codex",
        resume_thread: bool = True,
        tracer: SpanSink | None = None,
        version: str = "1",
    ) -> None:
        super().__init__(
            model=model,
            args=args,
            cwd=cwd,
            env=env,
            executable=executable,
            resume=resume_thread,
            tracer=tracer,
            version=version,
        )

    def start(self, prompt: str, marker: Mapping[str, JsonValue]) -> CliRun:
        thread = marker.get("thread_id")
        before = marker.get("usage")
        tapped = run_codex(
            prompt,
            model=self.model,
            resume=thread if isinstance(thread, str) else None,
            args=self.args,
            executable=self.executable,
            cwd=self.cwd,
            env=self.env,
        )

        def thread_marker() -> dict[str, JsonValue] | None:
            if tapped.thread_id is None:
                return None
            total = tapped.usage()
            counts: dict[str, JsonValue] = {name: getattr(total, name) for name in _COUNTS}
            return {"thread_id": tapped.thread_id, "usage": counts}

        def own_usage(usage: TurnUsage) -> TurnUsage:
            return _since(usage, before) if isinstance(thread, str) else usage

        return CliRun(tapped, thread_marker, lambda: {"threadId": tapped.thread_id}, own_usage)


def durable(
    *,
    model: str | None = None,
    args: Sequence[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    executable: str = "codex",
    resume_thread: bool = True,
    max_attempts: int | None = None,
    timeout: float | None = None,
) -> AgentDefinition:
    """Codex as a Tether agent (for ``Runtime`` or ``tether serve --app``): see
    :class:`CodexHarness`.

    Example::

        def agents():
            return {"coder": durable(args=["--sandbox", "workspace-write"], cwd="/srv/repo")}
    """
    harness = CodexHarness(
        model=model,
        args=args,
        cwd=cwd,
        env=env,
        executable=executable,
        resume_thread=resume_thread,
    )
    return durable_definition(harness, max_attempts=max_attempts, timeout=timeout)
