"""``claude -p`` as a subprocess, tapped as it runs."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from tether.integrations._cli import CliProcess
from tether.integrations.claude_code._tap import ClaudeCodeTurn

__all__ = ("claude_code_argv", "run_claude_code")

INSTALL_HINT = "npm install -g @anthropic-ai/claude-code"


def claude_code_argv(
    *,
    executable: str = "claude",
    model: str | None = None,
    resume: str | None = None,
    partial_messages: bool = False,
    args: Sequence[str] = (),
) -> list[str]:
    """The command line :func:`run_claude_code` runs; the prompt goes to its stdin.

    Example::

        claude_code_argv(model="claude-sonnet-4-5", args=["--allowedTools", "Read"])
        # ['claude', '-p', '--output-format', 'stream-json', '--verbose',
        #  '--model', 'claude-sonnet-4-5', '--allowedTools', 'Read']
    """
    argv = [executable, "-p", "--output-format", "stream-json", "--verbose"]
    if partial_messages:
        argv.append("--include-partial-messages")
    if model is not None:
        argv += ["--model", model]
    if resume is not None:
        argv += ["--resume", resume]
    return [*argv, *args]


def run_claude_code(
    prompt: str,
    *,
    model: str | None = None,
    resume: str | None = None,
    partial_messages: bool = False,
    args: Sequence[str] = (),
    executable: str = "claude",
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    terminate_grace: float = 5.0,
) -> ClaudeCodeTurn:
    """A turn that runs ``claude -p --output-format stream-json --verbose`` on ``prompt``
    (written to its stdin, so no prompt is taken for an option) and taps its stdout as it
    comes. The CLI starts when the events are first read, never through a shell; ``env``
    is laid over this process's environment (and its ``PATH`` finds ``executable``).

    ``resume`` continues a Claude Code session (``--resume``); ``partial_messages`` streams
    text and tool arguments as the model writes them (``--include-partial-messages``);
    ``args`` go on the command line as they are (``--allowedTools``, ``--permission-mode``,
    ``--max-turns``, ``--mcp-config``...). A consumer that stops reading ends the CLI:
    SIGTERM to its process group, SIGKILL after ``terminate_grace`` seconds.

    Example::

        turn = run_claude_code("Fix the failing test", args=["--allowedTools", "Edit Bash"])
        async for event in UnifiedEmitter().yield_turn(turn):
            print(event.type)
        print(turn.usage().cost_usd, turn.failure, turn.process.returncode)
    """
    argv = claude_code_argv(
        executable=executable,
        model=model,
        resume=resume,
        partial_messages=partial_messages,
        args=args,
    )
    process = CliProcess(
        argv,
        stdin=prompt,
        cwd=cwd,
        env=env,
        install_hint=INSTALL_HINT,
        terminate_grace=terminate_grace,
    )
    return ClaudeCodeTurn(process, model=model)
