"""scheduler: a durable schedule fires one signal per window into a session, exactly once.

Runbook (from the repository root, with the ``.venv`` the README's first command made)::

    .venv/bin/python -m examples.scheduler & A=$!  # http://127.0.0.1:8488, a window every 2 s
    #   --every SECONDS, --port, --host, --store sqlite:///./examples-data/scheduler (the
    #   default), --think-seconds (how long the keyless model takes to answer, 0.5 s)

    # The schedule, and the start of its next window.
    curl -s localhost:8488/schedules
    #   {"schedules": [{"id": "sch-...", "agent": "monitor", "instance": "site", "every": 2.0,
    #    "kind": "signal", "missed": "skip", "source": "config", "nextFireAt": "..."}]}

    # The session it writes to: its log grows by one submission (8 records) per window.
    curl -s 'localhost:8488/sessions?agent=monitor'      # "records": 9, 17, 25, ...
    curl -s localhost:8488/agents/monitor/site/messages  # per window, a signal and its answer:
    #   {"type": "schedule", "body": "check the site", "sender": {"schedule": "sch-..."},
    #    "tag": "2026-...T09:00:02Z"}, "Checked the site for the window of 2026-...T09:00:02Z..."
    curl -N 'localhost:8488/agents/monitor/site?follow=true'   # live (Ctrl-C to stop)

    # A second process on the same store: both fire every window; the first admission wins.
    .venv/bin/python -m examples.scheduler --port 9488 & B=$!
    sleep 5; kill -9 $A                         # B goes on, and finishes a window A was running
    sleep 5; .venv/bin/python -m examples.scheduler & A=$!
    sleep 5

    # Every window once: its dispatch id is schedule:<id>:<window start>, idempotent per
    # session, so a second admission of it (the other process, a restart) admits nothing.
    curl -s 'localhost:8488/agents/monitor/site/records?limit=1000' | python3 -c '
    import collections, json, sys
    tags = [r["payload"]["tag"] for r in json.load(sys.stdin)["records"] if r["kind"] == "signal"]
    print(len(tags), "windows; twice:", [t for t, n in collections.Counter(tags).items() if n > 1])'
    #   9 windows; twice: []
    curl -s localhost:8488/submissions/<a submissionId of those records>   # "dispatchId":
    #   "schedule:sch-...:2026-...T09:00:02Z", "settlement": {"status": "succeeded", ...}
    kill $A $B

There is no lock and no leader: every worker fires every window it sees, and the store keeps
the first admission of each window's dispatch id. A process killed while a window runs leaves
a submission that another takes over (or the same one, restarted) and finishes. Windows that
start while no process runs are skipped (``missed="skip"``); a process that starts fires the
window in progress. The schedule's id is a digest of its definition, so processes started
with the same ``--every`` share it; schedules added with ``POST /schedules`` are kept in the
store and fired by every process on it::

    curl -s -XPOST localhost:8488/schedules -H 'content-type: application/json' \\
         -d '{"agent": "monitor", "instance": "db", "every": 10, "body": "check the database"}'

Every window adds a signal and its answer to the one session, whose whole history the model
reads each time: a schedule meant to run for long would give its agent a ``context_window``
(``agent_spec(context_window=...)`` compacts the history past it). With a real model::

    TETHER_MODEL=openai:gpt-4.1-mini OPENAI_API_KEY=... \\
        .venv/bin/python -m examples.scheduler --every 30
"""

from __future__ import annotations

import argparse
import re

from examples._serving import serve
from tether.agent import agent_spec
from tether.engine import AgentDefinition, Runtime, Schedule
from tether.http import create_app
from tether.messages import ModelRequest
from tether.models import (
    Delay,
    ModelConfigError,
    Rule,
    ScriptedModel,
    Text,
    check_model_env,
    model_from_env,
)

__all__ = ("agents", "main", "schedule")

PORT = 8488
SYSTEM_PROMPT = (
    "You are a site monitor. Each <signal> you receive is a scheduled check; its tag is the "
    "start of its window. Answer each with one line: 'Checked the site for the window of "
    "<tag>: all quiet.'"
)
_TAG = re.compile(r'<signal type="schedule"[^>]* tag="([^"]+)"')


def keyless_model(think_seconds: float) -> ScriptedModel:
    """Deterministic and offline: it answers each window's signal, naming the window, after
    ``think_seconds`` (as a real model takes a while: a kill may land mid-run)."""

    def answer(request: ModelRequest) -> list[Delay | Text]:
        found = _TAG.search(request.messages[-1].text)
        window = found.group(1) if found else "an unknown window"
        return [
            Delay(think_seconds),
            Text(f"Checked the site for the window of {window}: all quiet."),
        ]

    return ScriptedModel(
        [Rule(_TAG, answer)], chunk=8, default="I answer scheduled checks.", record=False
    )


def agents(think_seconds: float = 0.5) -> dict[str, AgentDefinition]:
    """``monitor``: the keyless model (or ``TETHER_MODEL``'s), no tools."""
    chosen = model_from_env(keyless_model(think_seconds), default_name="scripted")
    spec = agent_spec(chosen.model, model_name=chosen.name, system_prompt=SYSTEM_PROMPT)
    return {"monitor": AgentDefinition(lambda instance, env: spec)}


def schedule(every: float) -> Schedule:
    """A signal to ``monitor/site`` every ``every`` seconds (windows at whole multiples of it
    since the Unix epoch, so every process agrees on them)."""
    return Schedule("monitor", "site", every=every, body="check the site")


def main(argv: list[str] | None = None) -> None:
    """Serve ``monitor`` and fire its schedule until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m examples.scheduler",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--store", default="sqlite:///./examples-data/scheduler")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between windows (2)")
    parser.add_argument("--think-seconds", type=float, default=0.5, help="default 0.5")
    args = parser.parse_args(argv)
    try:
        check_model_env()  # a bad TETHER_MODEL or a missing key fails now, not at a first call
    except ModelConfigError as exc:
        parser.exit(2, f"error: {exc}\n")
    ticks = schedule(args.every)
    runtime = Runtime(agents(args.think_seconds), args.store, schedules=[ticks])
    banner = (
        f"serving monitor on http://{args.host}:{args.port}: schedule {ticks.id} every "
        f"{args.every:g} s (worker {runtime.config.owner_id})"
    )
    serve(create_app(runtime, manage_runtime=True), args.host, args.port, banner)
