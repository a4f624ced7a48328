"""``codex exec --json`` as a subprocess, tapped as it runs."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from tether.integrations._cli import CliProcess
from tether.integrations.codex._tap import CodexTurn

__all__ = ("codex_argv", "run_codex")

INSTALL_HINT = "npm install -g @openai/codex"


def codex_argv(
    *,
    executable: str = "codex",
    model: str | None = None,
    resume: str | None = None,
    args: Sequence[str] = (),
) -> list[str]:
    """The command line :func:`run_codex` runs; the prompt goes to its stdin (the ``-``).

    Example::

        codex_argv(model="gpt-5.5", resume="0199a213-81c0-7800-8aa1-bbab2a035a53")
        # ['codex', 'exec', '--json', '--model', 'gpt-5.5',
        #  'resume', '0199a213-81c0-7800-8aa1-bbab2a035a53', '-']
    """
    argv = [executable, "exec", "--json"]
    if model is not None:
        argv += ["--model", model]
    argv += args
    if resume is not None:
        argv += ["resume", resume]
    return [*argv, "-"]


def run_codex(
    prompt: str,
    *,
    model: str | None = None,
    resume: str | None = None,
    args: Sequence[str] = (),
    executable: str = "codex",
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    terminate_grace: float = 5.0,
) -> CodexTurn:
    """A turn that runs ``codex exec --json`` on ``prompt`` (written to its stdin, so no
    prompt is taken for an option) and taps its stdout as it comes. The CLI starts when the
    events are first read, never through a shell; ``env`` is laid over this process's
    environment (and its ``PATH`` finds ``executable``).

    ``resume`` continues a Codex thread (``codex exec resume <id>``); ``args`` are ``codex
    exec`` options, as they are (``--sandbox``, ``--skip-git-repo-check``, ``-c key=value``,
    ``--cd``...). A consumer that stops reading ends the CLI: SIGTERM to its process group,
    SIGKILL after ``terminate_grace`` seconds.

    Example::

        turn = run_codex("Fix the failing test", args=["--sandbox", "workspace-write"])
        async for event in UnifiedEmitter().yield_turn(turn):
            print(event.type)
        print(turn.usage().output_tokens, turn.failure, turn.process.returncode)
    """
    argv = codex_argv(executable=executable, model=model, resume=resume, args=args)
    process = CliProcess(
        argv,
        stdin=prompt,
        cwd=cwd,
        env=env,
        install_hint=INSTALL_HINT,
        terminate_grace=terminate_grace,
    )
    return CodexTurn(process, model=model)
