"""The app the version tests' processes load (``--app tests.scale.versions_app:agents``).

One agent, ``mailer``, built on the built-in agent: its model (scripted) asks the ``deliver``
tool to deliver the user's text as a job, then answers ``"<version>: <the tool's result>"``,
so a run's answer names the version that made its last model call. ``deliver`` is not
idempotent (a resume that finds it started and unfinished must record ``unknown``, never run
it again), and it is slow on purpose: it runs until the test opens its gate (the file
``<TETHER_TEST_GATES>/<job>``), or for a minute at most.

What a process runs comes from its environment:

- ``TETHER_TEST_VERSIONS``: the versions it serves, oldest first (``v1``, ``v2``,
  ``v1,v2``: several are given as ``{"v1": ..., "v2": ...}``); each has its own system
  prompt (``You deliver mail, v1.``), so a recorded model call's input differs between them;
- ``TETHER_TEST_POLICY``: the newest version's policy (``pinned`` unless given);
- ``TETHER_TEST_HOLD``: a file the factory waits for before it returns (a minute at most):
  a test starts a process early, so its imports (seconds on a loaded machine) overlap the
  rest of the test, and lets it go on (open its store, claim) at the moment it chooses.

Every process audits itself into the JSON-lines file ``TETHER_TEST_AUDIT`` (one ``write`` per
line, ``O_APPEND``, so concurrent processes never interleave a line): ``started`` (its pid and
versions), ``model`` (one model invocation: the version whose definition made it and the
job), ``tool_start`` / ``tool_end`` (one run of ``deliver``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from pydantic import JsonValue

from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, VersionPolicy
from tether.messages import ModelRequest, ToolResultPart
from tether.models import ScriptedModel, ToolUse

__all__ = (
    "AGENT",
    "AUDIT_ENV",
    "GATES_ENV",
    "HOLD_ENV",
    "POLICY_ENV",
    "VERSIONS_ENV",
    "agents",
    "audited",
)

AGENT = "mailer"
VERSIONS_ENV = "TETHER_TEST_VERSIONS"
POLICY_ENV = "TETHER_TEST_POLICY"
AUDIT_ENV = "TETHER_TEST_AUDIT"
GATES_ENV = "TETHER_TEST_GATES"
HOLD_ENV = "TETHER_TEST_HOLD"
_WAIT_SECONDS = 60.0
_POLL = 0.05


def audit(event: str, **fields: JsonValue) -> None:
    path = os.environ.get(AUDIT_ENV)
    if not path:
        return
    line = json.dumps({"pid": os.getpid(), "t": time.time(), "event": event, **fields})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def audited(path: Path) -> list[dict[str, JsonValue]]:
    """What the processes audited so far, in the order they wrote it."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


async def _opened(gate: Path) -> None:
    """Until the test opens ``gate`` (creates the file), or a minute passes."""
    for _ in range(int(_WAIT_SECONDS / _POLL)):
        if await asyncio.to_thread(gate.exists):
            return
        await asyncio.sleep(_POLL)  # a file says nothing when it appears: it is looked at


def _definition(version: str, policy: VersionPolicy = "pinned") -> AgentDefinition:
    @tool
    async def deliver(job: str) -> str:
        """Deliver a job (slow: until the test opens its gate)."""
        audit("tool_start", version=version, job=job)
        await _opened(Path(os.environ[GATES_ENV]) / job)
        audit("tool_end", version=version, job=job)
        return f"delivered {job} on {version}"

    def reply(request: ModelRequest) -> object:
        last = request.messages[-1]
        job = next(m.text for m in request.messages if m.role == "user")
        audit("model", version=version, job=job, after=last.role)
        if last.role == "user":
            return ToolUse("deliver", {"job": job})
        results = [p.content for p in last.parts if isinstance(p, ToolResultPart)]
        return f"{version}: {' '.join(results)}"

    spec = agent_spec(
        ScriptedModel(reply, record=False),
        model_name="scripted",
        system_prompt=f"You deliver mail, {version}.",
        tools=[deliver],
    )
    return AgentDefinition(lambda instance, env: spec, version=version, policy=policy)


def agents() -> Mapping[str, AgentDefinition | Mapping[str, AgentDefinition]]:
    """The factory ``--app tests.scale.versions_app:agents`` names."""
    hold = os.environ.get(HOLD_ENV)
    deadline = time.monotonic() + _WAIT_SECONDS
    while hold and not Path(hold).exists() and time.monotonic() < deadline:
        time.sleep(_POLL)  # held at start: nothing runs yet, no loop to block
    served = os.environ.get(VERSIONS_ENV, "v1")
    policy = os.environ.get(POLICY_ENV, "pinned")
    assert policy in ("pinned", "upgrade", "strict"), policy
    audit("started", versions=served)
    *older, newest = served.split(",")
    if not older:
        return {AGENT: _definition(newest, policy)}  # type: ignore[arg-type]
    # Several versions: the mapping form (the last is newest), as docs/versions.md shows it.
    return {
        AGENT: {
            **{v: _definition(v) for v in older},
            newest: _definition(newest, policy),  # type: ignore[arg-type]
        }
    }
