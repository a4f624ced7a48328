"""triage: structured results, checked against a JSON Schema, and a subagent for lookups.

A support ticket comes in; the ``triage`` agent asks its ``researcher`` subagent (the task
tool) for the customer's plan, then answers with JSON that the dispatch's ``resultSchema``
must validate. The keyless model's first answer is not JSON on purpose: the engine sends it
a corrective prompt (``resultRetries`` of them at most), and its second answer validates.

Start it (keyless: a scripted model, no API key; stored in ./examples-data/triage)::

    .venv/bin/python -m examples.triage          # http://127.0.0.1:8486

1. A ticket, with the schema its result must fit, waited for (``?wait=true``)::

    curl -s -XPOST 'localhost:8486/agents/triage/t-1001?wait=true' \\
         -H 'content-type: application/json' -d @- <<'EOF'
    {"body": "Customer acme: the CSV export crashes the app since this morning.",
     "resultRetries": 2,
     "resultSchema": {"type": "object", "additionalProperties": false,
       "required": ["category", "priority", "summary"],
       "properties": {"category": {"enum": ["bug", "billing", "question", "feature_request"]},
                      "priority": {"enum": ["low", "normal", "high", "urgent"]},
                      "summary": {"type": "string", "maxLength": 200}}}}
    EOF

   You see ``"status": "succeeded"`` and the validated JSON as the ``result``:
   ``{"category": "bug", "priority": "urgent", "summary": "the CSV export crashes ..."}``
   (a bug, and acme is on the enterprise plan: urgent).

2. The corrective retry, in the session's canonical stream (it ends once the session is
   idle; ``?follow=true`` to keep watching)::

    curl -s 'localhost:8486/agents/triage/t-1001?view=stream'

   In order: the ticket, the ``task`` call to the researcher and its answer ("acme is on
   the enterprise plan..."), the first answer ``{'category': 'bug', ...}`` (Python, not
   JSON), the engine's corrective message ("Your reply did not match the required JSON
   Schema: the reply is not JSON ..."), and the answer that validates.

3. The delegation, as a tree of submissions (``SUB``: the ``submissionId`` 1 printed)::

    SUB=...
    curl -s "localhost:8486/submissions/$SUB/tree"

   The root is the ``triage`` submission; in its ``children``, one ``researcher``
   submission (its own session, ``task-...``), settled ``succeeded`` with the plan as its
   result, and its own usage (the root's includes it).

4. A retry budget exhausted: a schema that also asks for an ``assignee``, which the keyless
   model never gives, and one corrective turn allowed::

    curl -s -XPOST 'localhost:8486/agents/triage/t-1002?wait=true' \\
         -H 'content-type: application/json' -d @- <<'EOF'
    {"body": "Customer initech: how do I add a user?",
     "resultRetries": 1,
     "resultSchema": {"type": "object", "required": ["category", "priority", "assignee"]}}
    EOF

   You see ``"status": "failed"``, ``"errorCode": "result_schema_invalid"`` and
   ``"error": "'assignee' is a required property"``: the first answer was not JSON, the
   corrected one lacked the field, and no retry was left. The stream of ``t-1002`` shows
   both tries; the server's log a line for the failed settlement.

With a real model (``.venv/bin/pip install -e '.[pydantic-ai]' 'pydantic-ai-slim[openai]'``)::

    TETHER_MODEL=openai:gpt-4.1-mini OPENAI_API_KEY=... .venv/bin/python -m examples.triage

The same requests work; a real model usually answers valid JSON at once (no corrective turn
in the stream), and may well invent an assignee in case 4. ``--port``, ``--host`` and
``--store`` change where it serves and stores.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections.abc import Mapping

from examples._serving import serve
from tether import AgentDefinition, AgentSpec, Runtime
from tether.agent import agent_spec, tool
from tether.engine import RESULT_CORRECTION
from tether.http import create_app
from tether.messages import ModelRequest, ToolResultPart
from tether.models import (
    ModelChoice,
    ModelConfigError,
    Rule,
    ScriptedModel,
    Text,
    ToolUse,
    check_model_env,
    model_from_env,
)

__all__ = ("agents", "main", "researcher", "triage")

PORT = 8486
STORE = "sqlite:///./examples-data/triage"
TRIAGE_PROMPT = (
    "You triage support tickets. First ask the `researcher` (the `task` tool) to look up the "
    "plan of the customer the ticket names. Then answer with ONLY a JSON object: `category` "
    "(bug, billing, question or feature_request), `priority` (low, normal, high or urgent; "
    "one level higher for an enterprise customer) and a one-sentence `summary`."
)
RESEARCHER_PROMPT = (
    "You look up customers. Call `lookup_plan` once for the customer you are asked about, "
    "then answer with its result in one sentence."
)
RESEARCHER_DESCRIPTION = "Looks up a customer's plan and support terms in the CRM."

# A stand-in for a CRM: the researcher's only source.
PLANS = {
    "acme": "acme is on the enterprise plan (4-hour response SLA, 250 seats).",
    "globex": "globex is on the team plan (next-business-day response, 20 seats).",
    "initech": "initech is on the free plan (community support only).",
}

# --- the keyless models: rules that make every runbook flow deterministic ---------------

CUSTOMER = re.compile(r"\bcustomer\s+([\w-]+)", re.IGNORECASE)
# The engine's corrective prompt, after an answer that did not fit the schema, begins so.
CORRECTION = RESULT_CORRECTION
CATEGORIES = (
    ("bug", ("crash", "error", "broken", "fails", "bug")),
    ("billing", ("refund", "charge", "invoice", "billing")),
    ("feature_request", ("could you add", "feature", "would be nice")),
)
PRIORITIES = ("low", "normal", "high", "urgent")
BASE_PRIORITY = {"bug": 2, "billing": 1, "feature_request": 0, "question": 0}


def _ticket(request: ModelRequest) -> str:
    """The latest ticket: the last user message that is not the engine's correction."""
    texts = [m.text for m in request.messages if m.role == "user" and CORRECTION not in m.text]
    return texts[-1] if texts else ""


def _plan(request: ModelRequest) -> str:
    """What the researcher answered (the latest task result), if it was asked."""
    results = [
        part.content
        for message in request.messages
        for part in message.parts
        if isinstance(part, ToolResultPart) and not part.is_error
    ]
    return results[-1] if results else "an unknown plan"


def classify(ticket: str, plan: str) -> dict[str, str]:
    """The keyless triage: keywords for the category, one level up for enterprise."""
    text = ticket.lower()
    category = next(
        (name for name, words in CATEGORIES if any(word in text for word in words)), "question"
    )
    level = BASE_PRIORITY[category] + (1 if "enterprise" in plan else 0)
    summary = CUSTOMER.sub("", ticket, count=1).lstrip(" :,").strip()
    return {"category": category, "priority": PRIORITIES[level], "summary": summary[:200]}


def _delegate(request: ModelRequest) -> ToolUse:
    found = CUSTOMER.search(_ticket(request))
    prompt = f"Look up the plan of customer {found.group(1) if found else 'unknown'}."
    return ToolUse("task", {"agent": "researcher", "prompt": prompt})


def _first_draft(request: ModelRequest) -> Text:
    """The first answer: a Python dict, not JSON (the mistake the corrective retry fixes)."""
    return Text(repr(classify(_ticket(request), _plan(request))))


def _corrected(request: ModelRequest) -> Text:
    return Text(json.dumps(classify(_ticket(request), _plan(request))))


TRIAGE_MODEL = ScriptedModel(
    [
        Rule(CORRECTION, _corrected),  # the engine's correction: now answer JSON
        Rule(CUSTOMER, _delegate),  # a ticket naming a customer: ask the researcher
        Rule("", _first_draft, on="tool"),  # the researcher answered: the first draft
    ],
    default=Text("{'category': 'question'}"),
    record=False,  # a server's model keeps no requests
)


def _lookup(request: ModelRequest) -> ToolUse:
    found = re.search(r"plan of customer ([\w-]+)", request.messages[-1].text)
    return ToolUse("lookup_plan", {"customer": found.group(1) if found else ""})


RESEARCHER_MODEL = ScriptedModel(
    [
        Rule("plan of customer", _lookup),
        Rule("", lambda request: Text(_plan(request)), on="tool"),  # its result, as it is
    ],
    default=Text("I can only look up a customer's plan."),
    record=False,
)

# --- the agents -------------------------------------------------------------------------


@tool(idempotent=True)
async def lookup_plan(customer: str) -> str:
    """The customer's plan and support terms, from the CRM."""
    return PLANS.get(customer.lower(), f"no customer named {customer!r} in the CRM.")


def _model(keyless: ScriptedModel) -> ModelChoice:
    """``TETHER_MODEL``'s model if it is set, else the keyless one."""
    return model_from_env(keyless, default_name="scripted")


def triage(instance: str, env: Mapping[str, str]) -> AgentSpec:
    """The triage agent: no tools of its own; the runtime offers it ``task``."""
    chosen = _model(TRIAGE_MODEL)
    return agent_spec(chosen.model, model_name=chosen.name, system_prompt=TRIAGE_PROMPT)


def researcher(instance: str, env: Mapping[str, str]) -> AgentSpec:
    """The subagent: one idempotent lookup tool."""
    chosen = _model(RESEARCHER_MODEL)
    return agent_spec(
        chosen.model, model_name=chosen.name, system_prompt=RESEARCHER_PROMPT, tools=[lookup_plan]
    )


def agents() -> dict[str, AgentDefinition]:
    return {
        "triage": AgentDefinition(triage, description="triages support tickets"),
        "researcher": AgentDefinition(researcher, description=RESEARCHER_DESCRIPTION),
    }


def main(argv: list[str] | None = None) -> None:
    """``.venv/bin/python -m examples.triage [--host H] [--port P] [--store URL]``."""
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m examples.triage", description=__doc__
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--store", default=STORE, help=f"a store URL (default {STORE})")
    args = parser.parse_args(argv)
    try:
        check_model_env()  # a bad TETHER_MODEL or a missing key fails now, not at a request
    except ModelConfigError as exc:
        parser.exit(2, f"error: {exc}\n")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    runtime = Runtime(agents(), args.store, subagents={"triage": ["researcher"]})
    banner = f"serving triage and researcher on http://{args.host}:{args.port}"
    serve(create_app(runtime, manage_runtime=True), args.host, args.port, banner)
