"""``tether inputs`` and ``tether answer``: the questions runs wait on, and answering one."""

from __future__ import annotations

import enum
import json
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from tether.cli._connect import DEFAULT_URL, TOKEN, connect
from tether.cli._exit import one_line
from tether.cli._gates import describe_input, verified

if TYPE_CHECKING:
    from tether.wire import InputItem

__all__ = ("answer", "describe_answer", "inputs", "parse_value")

console = Console(soft_wrap=True, highlight=False, emoji=False)
URL = typer.Option(DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to talk to.")


class InputFilter(enum.StrEnum):
    PENDING = "pending"
    ANSWERED = "answered"
    CLOSED = "closed"
    ALL = "all"


STATUS = typer.Option(
    InputFilter.PENDING,
    "--status",
    help="pending: waiting for an answer; answered: the answers given (what, by whom, "
    "when); closed: settled before anyone answered; all.",
)


def inputs(
    status: InputFilter = STATUS,
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's."),
    instance: str | None = typer.Option(None, "--instance", help="Only this instance's."),
    limit: int = typer.Option(100, "--limit", min=1, max=1000, help="At most this many."),
    cursor: str | None = typer.Option(
        None, "--cursor", help="Where the previous page said the next one starts."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """List the inputs runs asked for, oldest first: by default those waiting for an answer."""
    with connect(url, auth_token) as client:
        page = client.inputs(
            status=status.value, agent=agent, instance=instance, limit=limit, cursor=cursor
        )
    if not page.inputs:
        console.print("no inputs waiting" if status is InputFilter.PENDING else "no inputs")
    for item in page.inputs:
        console.print(
            f"{item.input_id}  {item.status:8}  "
            f"{escape(item.agent)}/{escape(item.instance)}/{escape(item.session)}  "
            f"{escape(describe_input(item))}{escape(describe_answer(item))}"
        )
    if page.next_cursor:
        console.print(f"more: add --cursor {page.next_cursor}")


def describe_answer(item: InputItem) -> str:
    """``  -> "Ann" by ann (ann@acme, acme) at <time>`` for an answered input (the verified
    subject and tenant when the server knew them), ``  closed at <time>`` for a closed one,
    nothing for a pending one."""
    if item.status == "answered":
        when = f" at {item.answered_at}" if item.answered_at else ""
        value = one_line(json.dumps(item.answer, ensure_ascii=False))
        return f"  -> {value} by {item.responder}{verified(item.decided_by)}{when}"
    return f"  closed at {item.closed_at}" if item.closed_at else ""


def parse_value(text: str) -> Any:
    """An answer as typed: JSON when it parses (``42``, ``true``, ``{"a": 1}``, ``"42"``),
    else the text itself (``Ann``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def answer(
    input_id: str = typer.Argument(help="The input's id (see `tether inputs`)."),
    value: str = typer.Argument(
        help='The answer: JSON if it parses (42, true, {"a": 1}, "42"), else the text as typed.'
    ),
    text: bool = typer.Option(
        False, "--text", help="Take VALUE as text, as typed, even when it parses as JSON."
    ),
    responder: str = typer.Option("cli", "--responder", help="Who answers, as recorded."),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Answer an input a run waits for; the run resumes with the value."""
    with connect(url, auth_token) as client:
        client.answer(input_id, value if text else parse_value(value), responder=responder)
    console.print(f"answered {input_id}")
