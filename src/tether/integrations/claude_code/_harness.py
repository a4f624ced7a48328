"""Claude Code as a Tether agent: one ``claude -p`` run per execution, written into the
session's log by ``auto_send_turn``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from tether.engine import AgentDefinition
from tether.integrations._bridge import durable_definition
from tether.integrations._cli import CliHarness, CliRun
from tether.integrations.claude_code._run import run_claude_code
from tether.stream import SpanSink

__all__ = ("ClaudeCodeFailed", "ClaudeCodeHarness", "durable")

SESSION_KEY = "tether.claude_code"
"""The data part under which a run leaves its Claude Code session id in the transcript."""
OUTCOME_STEP = "tether.claude_code.outcome"
"""The step that records how a run ended (its session, failure and exit status)."""


class ClaudeCodeFailed(RuntimeError):
    """The CLI run failed: an error ``result`` (``error_max_turns``, an API error), a
    non-zero exit, or a stream that ended without a ``result``. The run's output up to
    there is in the log all the same."""


class ClaudeCodeHarness(CliHarness):
    """Runs ``claude -p`` once per execution on the execution's input, and writes the run
    into the session's log with :meth:`~tether.stream.UnifiedEmitter.auto_send_turn`:
    its text, thinking, tool calls and results stream as records (SSE shows them live),
    stay across restarts, and replay with no CLI (a replay never starts it).

    With ``resume_session`` (the default) a session's later messages continue the same
    Claude Code session (``--resume``, the id the previous run left in the transcript), so
    the CLI keeps its context; its session files must still be where it keeps them.

    A crash mid-run cannot resume the CLI in the middle: the resumed execution keeps what
    was recorded and runs the CLI again from the start. A run that fails raises
    :class:`ClaudeCodeFailed` (the submission fails; the error is also in the stream).

    Example::

        harness = ClaudeCodeHarness(args=["--allowedTools", "Read Grep"], cwd="/srv/repo")
    """

    name = "claude-code"
    marker_key = SESSION_KEY
    outcome_step = OUTCOME_STEP
    failed = ClaudeCodeFailed

    def __init__(
        self,
        *,
        model: str | None = None,
        args: Sequence[str] = (),
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        executable: str = "claude",
        partial_messages: bool = True,
        resume_session: bool = True,
        tracer: SpanSink | None = None,
        version: str = "1",
    ) -> None:
        super().__init__(
            model=model,
            args=args,
            cwd=cwd,
            env=env,
            executable=executable,
            resume=resume_session,
            tracer=tracer,
            version=version,
        )
        self.partial_messages = partial_messages

    def start(self, prompt: str, marker: Mapping[str, JsonValue]) -> CliRun:
        session = marker.get("session_id")
        tapped = run_claude_code(
            prompt,
            model=self.model,
            resume=session if isinstance(session, str) else None,
            partial_messages=self.partial_messages,
            args=self.args,
            executable=self.executable,
            cwd=self.cwd,
            env=self.env,
        )

        def session_marker() -> dict[str, JsonValue] | None:
            return None if tapped.session_id is None else {"session_id": tapped.session_id}

        return CliRun(tapped, session_marker, lambda: {"sessionId": tapped.session_id})


def durable(
    *,
    model: str | None = None,
    args: Sequence[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    executable: str = "claude",
    partial_messages: bool = True,
    resume_session: bool = True,
    max_attempts: int | None = None,
    timeout: float | None = None,
) -> AgentDefinition:
    """Claude Code as a Tether agent (for ``Runtime`` or ``tether serve --app``): see
    :class:`ClaudeCodeHarness`.

    Example::

        def agents():
            return {"coder": durable(args=["--allowedTools", "Read Edit"], cwd="/srv/repo")}
    """
    harness = ClaudeCodeHarness(
        model=model,
        args=args,
        cwd=cwd,
        env=env,
        executable=executable,
        partial_messages=partial_messages,
        resume_session=resume_session,
    )
    return durable_definition(harness, max_attempts=max_attempts, timeout=timeout)
