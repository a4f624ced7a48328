"""Claude Code in Tether: a tap that turns ``claude -p --output-format stream-json`` events
into the canonical stream, a helper that runs the CLI and taps it as it runs, and a harness
that makes each run durable in a session's log (``auto_send_turn``). No extra is needed: the
CLI is a separate program (``npm install -g @anthropic-ai/claude-code``).

Example::

    from tether.integrations.claude_code import ClaudeCodeTurn, durable, run_claude_code

    with open("run.jsonl") as lines:        # a captured run: claude -p ... > run.jsonl
        async for event in UnifiedEmitter().yield_turn(ClaudeCodeTurn(lines)):
            ...

    turn = run_claude_code("Summarize README.md", args=["--allowedTools", "Read"])

    def agents():                           # tether serve --app myapp:agents
        return {"coder": durable(args=["--allowedTools", "Read Grep"], cwd="/srv/repo")}
"""

from tether.integrations.claude_code._harness import ClaudeCodeFailed, ClaudeCodeHarness, durable
from tether.integrations.claude_code._run import claude_code_argv, run_claude_code
from tether.integrations.claude_code._tap import (
    ClaudeCodeTurn,
    claude_code_usage,
    convert_claude_code_events,
)

__all__ = (
    "ClaudeCodeFailed",
    "ClaudeCodeHarness",
    "ClaudeCodeTurn",
    "claude_code_argv",
    "claude_code_usage",
    "convert_claude_code_events",
    "durable",
    "run_claude_code",
)
