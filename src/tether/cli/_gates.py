"""How the client commands show what a run waits for: an approval's call and its decision, an
input's question and its answer, who decided as the server verified them, and the command
that decides or answers one."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from tether.cli._exit import one_line
from tether.client import DEFAULT_URL

if TYPE_CHECKING:
    from tether._payloads import Actor
    from tether.wire import ApprovalItem, InputItem

__all__ = (
    "PROMPT_WIDTH",
    "answer_command",
    "approve_command",
    "describe_decision",
    "describe_gate",
    "describe_input",
    "verified",
)

PROMPT_WIDTH = 120
"""How much of an input's prompt one line shows."""


def approve_command(gate: ApprovalItem, url: str) -> str:
    """The command that decides ``gate`` (with ``--url`` when it is not the default)."""
    words = ["tether", "approve", gate.approval_id]
    if url != DEFAULT_URL:
        words += ["--url", url]
    return shlex.join(words)


def answer_command(item: InputItem, url: str) -> str:
    """The command that answers input ``item``, VALUE left for the person to give (with
    ``--url`` when it is not the default)."""
    command = shlex.join(["tether", "answer", item.input_id]) + " VALUE"
    if url != DEFAULT_URL:
        command += " " + shlex.join(["--url", url])
    return command


def describe_input(item: InputItem) -> str:
    """An input's prompt on one line (cut at :data:`PROMPT_WIDTH`), quoted, and the schema
    its answer must fit, if it has one."""
    prompt = one_line(item.prompt)
    if len(prompt) > PROMPT_WIDTH:
        prompt = prompt[: PROMPT_WIDTH - 1] + "…"
    schema = item.answer_schema
    fits = f" (answer: {json.dumps(schema)})" if schema is not None else ""
    return f"{json.dumps(prompt, ensure_ascii=False)}{fits}"


def describe_gate(gate: ApprovalItem) -> str:
    return f"{gate.tool}({json.dumps(gate.args)})"


def verified(by: Actor | None) -> str:
    """`` (ann@acme, acme)``: who decided or answered as the server verified them (their
    subject, and tenant if any), after the name they are shown under; nothing when no one
    authenticated did."""
    if by is None or not by.subject:
        return ""
    tenant = f", {by.tenant}" if by.tenant else ""
    return f" ({by.subject}{tenant})"


def describe_decision(gate: ApprovalItem) -> str:
    """``  -> approve by Ann (ann@acme, acme) at <time>: <reason>`` for a decided gate (the
    verified subject and tenant when the server knew them), ``  closed at <time>`` for a
    closed one, nothing for a pending one."""
    decided = gate.decision
    if decided is None:
        return f"  closed at {gate.closed_at}" if gate.closed_at else ""
    edited = f" {json.dumps(decided.args)}" if decided.args is not None else ""
    reason = f": {decided.reason}" if decided.reason else ""
    when = f" at {gate.decided_at}" if gate.decided_at else ""
    who = f"{decided.approver}{verified(gate.decided_by)}"
    return f"  -> {decided.decision}{edited} by {who}{when}{reason}"
