"""``tether budgets`` and ``tether extend``: the runs parked on their budget, and deciding
one (an extension, or ``--reject``)."""

from __future__ import annotations

import enum
import json
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from tether.cli._connect import DEFAULT_URL, TOKEN, connect, request_body
from tether.cli._exit import ExitCode, fail
from tether.cli._gates import verified

if TYPE_CHECKING:
    from tether.wire import BudgetGateItem

__all__ = ("budgets", "describe_budget", "extend")

console = Console(soft_wrap=True, highlight=False, emoji=False)
URL = typer.Option(DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to talk to.")


class BudgetFilter(enum.StrEnum):
    PENDING = "pending"
    DECIDED = "decided"
    CLOSED = "closed"
    ALL = "all"


STATUS = typer.Option(
    BudgetFilter.PENDING,
    "--status",
    help="pending: waiting for a decision; decided: the decisions made; closed: settled "
    "before anyone decided; all.",
)


def budgets(
    status: BudgetFilter = STATUS,
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's."),
    instance: str | None = typer.Option(None, "--instance", help="Only this instance's."),
    limit: int = typer.Option(100, "--limit", min=1, max=1000, help="At most this many."),
    cursor: str | None = typer.Option(
        None, "--cursor", help="Where the previous page said the next one starts."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """List the runs parked on their budget (what they spent against which limit), oldest
    first: by default those waiting for a decision."""
    with connect(url, auth_token) as client:
        page = client.budgets(
            status=status.value, agent=agent, instance=instance, limit=limit, cursor=cursor
        )
    if not page.budgets:
        console.print("no budgets waiting" if status is BudgetFilter.PENDING else "no budgets")
    for item in page.budgets:
        console.print(
            f"{item.gate_id}  {item.status:8}  "
            f"{escape(item.agent)}/{escape(item.instance)}/{escape(item.session)}  "
            f"{escape(describe_budget(item))}"
        )
    if page.next_cursor:
        console.print(f"more: add --cursor {page.next_cursor}")


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe_budget(item: BudgetGateItem) -> str:
    """``modelCalls 5 of 5 (session)`` and, once decided, ``  -> approve +{"modelCalls": 3}
    by ops at <time>``, or ``  closed at <time>``."""
    scope = " (session)" if item.scope == "session" else ""
    text = f"{item.limit} {_number(item.used)} of {_number(item.max)}{scope}"
    if item.status == "decided":
        plus = f" +{json.dumps(item.extension)}" if item.extension else ""
        when = f" at {item.decided_at}" if item.decided_at else ""
        who = f"{item.approver}{verified(item.decided_by)}"
        return f"{text}  -> {item.decision}{plus} by {who}{when}"
    if item.closed_at:
        return f"{text}  closed at {item.closed_at}"
    return text


def extend(
    gate_id: str = typer.Argument(help="The budget gate's id (see `tether budgets`)."),
    model_calls: int | None = typer.Option(None, "--model-calls", min=0, help="More calls."),
    tokens: int | None = typer.Option(None, "--tokens", min=0, help="More tokens."),
    cost_usd: float | None = typer.Option(None, "--cost-usd", min=0, help="More dollars."),
    tool_calls: int | None = typer.Option(None, "--tool-calls", min=0, help="More tool calls."),
    wall_time: float | None = typer.Option(
        None, "--wall-time", min=0, help="More seconds of wall time."
    ),
    reject: bool = typer.Option(
        False, "--reject", help="End the run instead: it settles budget_exhausted."
    ),
    reason: str | None = typer.Option(None, "--reason", help="Why, as recorded."),
    approver: str = typer.Option("cli", "--approver", help="Who decides, as recorded."),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Extend the budget of a run parked on it (it resumes), or --reject (it settles)."""
    grant = {
        "modelCalls": model_calls,
        "tokens": tokens,
        "costUsd": cost_usd,
        "toolCalls": tool_calls,
        "wallTime": wall_time,
    }
    extension = {name: value for name, value in grant.items() if value is not None}
    if reject and extension:
        fail("--reject extends nothing: leave out the amounts", ExitCode.USAGE)
    if not reject and not extension:
        fail("say what to add (--model-calls, --tokens, ...), or --reject", ExitCode.USAGE)
    from tether.wire import BudgetDecisionBody

    body: dict[str, Any] = {
        "decision": "reject" if reject else "approve",
        "reason": reason,
        "approver": approver,
    }
    if extension:
        body["extension"] = extension
    decided = request_body(BudgetDecisionBody, body)
    with connect(url, auth_token) as client:
        client.decide_budget(
            gate_id,
            decided.decision,
            extension=decided.extension,
            reason=decided.reason,
            approver=decided.approver,
        )
    console.print(
        f"rejected {gate_id}" if reject else f"extended {gate_id} by {json.dumps(extension)}"
    )
