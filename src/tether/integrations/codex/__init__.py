"""Codex in Tether: a tap that turns ``codex exec --json`` events into the canonical stream,
a helper that runs the CLI and taps it as it runs, and a harness that makes each run durable
in a session's log (``auto_send_turn``). No extra is needed: the CLI is a separate program
(``npm install -g @openai/codex``).

Example::

    from tether.integrations.codex import CodexTurn, durable, run_codex

    with open("run.jsonl") as lines:        # a captured run: codex exec --json ... > run.jsonl
        async for event in UnifiedEmitter().yield_turn(CodexTurn(lines, model="gpt-5.5")):
            ...

    turn = run_codex("Summarize README.md", args=["--sandbox", "read-only"])

    def agents():                           # tether serve --app myapp:agents
        return {"coder": durable(args=["--sandbox", "workspace-write"], cwd="/srv/repo")}
"""

from tether.integrations.codex._harness import CodexFailed, CodexHarness, durable
from tether.integrations.codex._run import codex_argv, run_codex
from tether.integrations.codex._tap import CodexTurn, codex_usage, convert_codex_events

__all__ = (
    "CodexFailed",
    "CodexHarness",
    "CodexTurn",
    "codex_argv",
    "codex_usage",
    "convert_codex_events",
    "durable",
    "run_codex",
)
