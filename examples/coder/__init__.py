"""coder: a coding assistant on the workspace tools, rooted at a scratch directory, with an
observer that narrates what the tools do, a running ``bash`` command's output line by line.

Runbook (from the repository root, with the ``.venv`` the README's first command made)::

    .venv/bin/python -m examples.coder & SERVER=$!  # http://127.0.0.1:8490
    #   the workspace: ./examples-data/coder/workspace (--root DIR), seeded with hello.py (it
    #   has a bug) and test_hello.py; --reset seeds it again; --approve-bash gates each bash
    #   command on a human (5.); --sandbox none runs bash unsandboxed (see below); --port,
    #   --host, --store sqlite:///./examples-data/coder

    # 1. Ask for the fix, and wait for the answer.
    cat examples-data/coder/workspace/hello.py  # return "Hello, " + "name" + "!"
    curl -s -XPOST 'localhost:8490/agents/coder/me?wait=true' \\
         -H 'content-type: application/json' -d '{"body": "fix the bug in hello.py"}'
    #   "status": "succeeded", "result": "Fixed the bug in hello.py: ... The tests pass: 3
    #   passed, 0 failed.", "conversationId": "..."

    # 2. Meanwhile the server's stdout narrates: the model's moves (an interceptor), the tools
    #    (an observer), and the test run's output as it streams (tool progress):
    #   model: Looking for the Python files.
    #   model: -> glob {"pattern": "**/*.py"}
    #   tool: glob started (call-2-1)
    #   tool: glob done
    #   ... read, then edit ...
    #   model: -> bash {"command": "python3 test_hello.py"}
    #   tool: bash started (call-8-1)
    #   bash | ok   test_greets_anyone
    #   bash | ok   test_greets_by_name
    #   bash | ok   test_greets_the_world
    #   bash | 3 passed, 0 failed
    #   tool: bash done
    #   model: Fixed the bug in hello.py: ...
    cat examples-data/coder/workspace/hello.py  # return f"Hello, {name}!"

    # 3. The tool calls in the log, in order, each with its arguments:
    curl -s 'localhost:8490/agents/coder/me/records?limit=1000' | python3 -c '
    import json, sys
    for r in json.load(sys.stdin)["records"]:
        if r["kind"] == "tool_called": print(r["payload"]["tool"], r["payload"]["args"])'

    # 4. Replay it offline: zero model and tool calls, hello.py left as it is.
    .venv/bin/tether replay <conversationId> --store sqlite:///./examples-data/coder \\
           --app examples.coder:agents   # the answer; "model and tool invocations: 0"

    # 5. bash gated on a human (another instance, a fresh session): the run parks before the
    #    command, after the edit.
    kill $SERVER; .venv/bin/python -m examples.coder --reset --approve-bash & SERVER=$!
    curl -s -XPOST localhost:8490/agents/coder/gated -H 'content-type: application/json' \\
         -d '{"body": "fix the bug in hello.py"}'                  # 202, its submissionId
    curl -s localhost:8490/approvals         # {"approvalId": "...", "tool": "bash", "args":
    #   {"command": "python3 test_hello.py"}, ...}; stdout: "waiting: approval"
    curl -s -XPOST localhost:8490/approvals/<approvalId> -H 'content-type: application/json' \\
         -d '{"decision": "approve", "approver": "me"}'   # or "reject", with a "reason"
    curl -s 'localhost:8490/submissions/<submissionId>?wait=true'   # succeeded, tests pass
    #   Or decide it in the console: http://127.0.0.1:8490/ui?panel=approvals. Its replay
    #   takes --app examples.coder:gated_agents: the tools each model call was offered, and
    #   how each is gated, are part of its recorded input (agents would diverge at once).

``bash`` is not gated by default, so that the keyless demo runs unattended. It runs in
bubblewrap's sandbox (``bwrap``: Debian and Ubuntu ``apt-get install bubblewrap``): it sees
the workspace and the system's programs, not your files, environment or network. Without
``bwrap`` the example says so and stops; ``--sandbox none`` runs it anyway, unsandboxed: a
command then runs as your user and can read and write anything you can (the file tools stay
confined to the root). ``--approve-bash`` is the setting for a real model::

    TETHER_MODEL=openai:gpt-4.1-mini OPENAI_API_KEY=... \\
        .venv/bin/python -m examples.coder --approve-bash
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from examples._serving import serve
from examples.coder.project import BUG, FIX, seed
from tether.agent import agent_spec
from tether.engine import (
    AgentDefinition,
    ApprovalDecidedEvent,
    EngineEvent,
    Operation,
    Runtime,
    SubmissionSettledEvent,
    SubmissionWaiting,
    ToolEnded,
    ToolProgress,
    ToolStarted,
)
from tether.http import create_app
from tether.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolResultPart
from tether.models import (
    ModelConfigError,
    Reply,
    ScriptedModel,
    Text,
    ToolUse,
    check_model_env,
    model_from_env,
)
from tether.tools import SandboxUnavailable, workspace

__all__ = ("Narrator", "agents", "gated_agents", "main", "narrate_turns", "plan")

PORT = 8490
STORE = "sqlite:///./examples-data/coder"
ROOT = "./examples-data/coder/workspace"
TESTS = "python3 test_hello.py"
SYSTEM_PROMPT = (
    "You are a coding assistant working in a small project, through your tools: glob, grep, "
    "read, edit, write and bash (run from the project's root). To fix a bug: find and read "
    "the code, make the smallest edit that fixes it, run the tests with `python3 "
    "test_hello.py`, then say in two sentences what was wrong and whether the tests pass."
)
# --- the keyless model: a deterministic plan, one step per tool result ------------------

_FILE = re.compile(r"[\w./-]+\.py\b")


def plan(request: ModelRequest) -> Reply:
    """glob, read the file the ask names, edit it (if the bug is there), run the tests,
    report: each step decided by the last message (the ask, or a tool's result)."""
    messages = request.messages
    asked = max(i for i, message in enumerate(messages) if message.role == "user")
    ask, since = messages[asked].text, messages[asked + 1 :]
    target = (_FILE.findall(ask) or ["hello.py"])[0]
    if not since:
        if "bug" not in ask.lower():
            return Text(f"I fix bugs: ask me to 'fix the bug in {target}'.")
        return [Text("Looking for the Python files."), ToolUse("glob", {"pattern": "**/*.py"})]
    results = [p for m in since for p in m.parts if isinstance(p, ToolResultPart)]
    result = results[-1]
    if result.name == "glob":
        return [Text(f"Reading {target}."), ToolUse("read", {"path": target})]
    if result.name == "read" and BUG in result.content:
        edit = {"path": target, "old_string": BUG, "new_string": FIX}
        return [Text("greet() returns the literal 'name'. Fixing it."), ToolUse("edit", edit)]
    if result.name in ("read", "edit") and not result.is_error:
        return [Text("Running the tests."), ToolUse("bash", {"command": TESTS})]
    if result.is_error:
        return Text(f"I could not finish: {result.name} failed: {result.content}")
    if "[exit code 0]" not in result.content:
        return Text(f"The tests still fail:\n{result.content}")
    summary = (result.content.strip().splitlines()[-2:-1] or ["no output"])[0]
    if not any(r.name == "edit" for r in results):
        return Text(f"I found no bug in {target}: the tests pass: {summary}.")
    return Text(
        f"Fixed the bug in {target}: greet() returned the literal 'name' instead of the name "
        f"it was given; it now returns {FIX}. The tests pass: {summary}."
    )


KEYLESS = ScriptedModel(plan, chunk=8, record=False)  # a server's model keeps no requests


def agents(
    root: str = ROOT, approve_bash: bool = False, sandbox: Literal["bwrap", "none"] = "bwrap"
) -> dict[str, AgentDefinition]:
    """``coder``: the keyless model (or ``TETHER_MODEL``'s) with the workspace tools."""
    Path(root).mkdir(parents=True, exist_ok=True)
    no_pycache = {"PYTHONDONTWRITEBYTECODE": "1"}  # added to bash's scrubbed environment
    tools = workspace(
        root, bash_approval=approve_bash, bash_timeout=60, bash_env=no_pycache, sandbox=sandbox
    )
    chosen = model_from_env(KEYLESS, default_name="scripted")
    spec = agent_spec(
        chosen.model, model_name=chosen.name, system_prompt=SYSTEM_PROMPT, tools=tools
    )
    return {"coder": AgentDefinition(lambda instance, env: spec, description="fixes bugs")}


def gated_agents() -> dict[str, AgentDefinition]:
    """The agents as ``--approve-bash`` serves them, for ``tether replay --app``: the tools a
    model call is offered (and how each is mediated) are part of its recorded input."""
    return agents(approve_bash=True)


# --- the narration ----------------------------------------------------------------------


def say(line: str) -> None:
    print(line, flush=True)  # at once: a kill -9 loses nothing printed


class Narrator:
    """An observer: a line when a tool starts and ends, and a running tool's progress (bash's
    output, streamed as it comes) a whole line at a time; approvals and settlements too."""

    def __init__(self) -> None:
        self._partial: dict[str, str] = {}  # by call id: output after its last newline
        self._tools: dict[str, str] = {}

    def __call__(self, event: EngineEvent) -> None:
        if isinstance(event, ToolStarted):
            self._tools[event.call_id] = event.tool
            say(f"tool: {event.tool} started ({event.call_id})")
        elif isinstance(event, ToolProgress):
            *lines, rest = (self._partial.pop(event.call_id, "") + event.text).split("\n")
            for line in lines:
                say(f"{self._tools.get(event.call_id, 'tool')} | {line}")
            if rest:
                self._partial[event.call_id] = rest
        elif isinstance(event, ToolEnded):
            if rest := self._partial.pop(event.call_id, ""):
                say(f"{event.tool} | {rest}")
            self._tools.pop(event.call_id, None)
            say(f"tool: {event.tool} {'failed' if event.is_error else 'done'}")
        elif isinstance(event, SubmissionWaiting):
            say(f"waiting: {event.reason}")
        elif isinstance(event, ApprovalDecidedEvent):
            say(f"approval: {event.decision} by {event.approver}")
        elif isinstance(event, SubmissionSettledEvent):
            say(f"settled: {event.settlement.get('status')}")


async def narrate_turns(operation: Operation, call_next: Callable[[], Awaitable[Any]]) -> Any:
    """An interceptor: what the model answered each turn, its text and its tool calls with
    their arguments (the observer's tool events carry no arguments)."""
    response = await call_next()
    if operation.boundary == "turn" and isinstance(response, ModelResponse):
        for part in response.message.parts:
            if isinstance(part, TextPart):
                say(f"model: {part.text}")
            elif isinstance(part, ToolCallPart):
                say(f"model: -> {part.name} {json.dumps(part.args)}")
    return response


def main(argv: list[str] | None = None) -> None:
    """Serve ``coder`` until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m examples.coder",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--store", default=STORE, help=f"a store URL (default {STORE})")
    parser.add_argument("--root", default=ROOT, help=f"the workspace (default {ROOT})")
    parser.add_argument("--reset", action="store_true", help="seed the workspace again")
    parser.add_argument("--approve-bash", action="store_true", help="gate bash on a human")
    parser.add_argument(
        "--sandbox",
        choices=("bwrap", "none"),
        default="bwrap",
        help="bash's sandbox (default bwrap); none runs commands as your user, unconfined",
    )
    args = parser.parse_args(argv)
    try:
        check_model_env()  # a bad TETHER_MODEL or a missing key fails now, not at a first call
    except ModelConfigError as exc:
        parser.exit(2, f"error: {exc}\n")
    seed(Path(args.root), reset=args.reset)
    try:
        coder = agents(args.root, args.approve_bash, args.sandbox)
    except SandboxUnavailable as exc:
        parser.exit(2, f"error: {exc} (here: --sandbox none)\n")
    runtime = Runtime(
        coder,
        args.store,
        observers=[Narrator()],
        interceptors=[narrate_turns],
    )
    gate = " (bash needs approval)" if args.approve_bash else ""
    banner = f"serving coder on http://{args.host}:{args.port}, workspace {args.root}{gate}"
    serve(create_app(runtime, manage_runtime=True), args.host, args.port, banner)
