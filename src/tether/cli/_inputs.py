"""``tether inputs`` and ``tether answer``: the questions runs wait on, and answering one."""

from __future__ import annotations

import enum
import json
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from tether.cli import _client
from tether.cli._exit import one_line

__all__ = ("answer", "describe_answer", "inputs", "parse_value")

console = Console(soft_wrap=True, highlight=False, emoji=False)
URL = typer.Option(_client.DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to talk to.")
TOKEN = _client.TOKEN


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
    items, next_cursor = _client.list_page(
        url,
        auth_token,
        "/inputs",
        "inputs",
        status=status.value,
        limit=limit,
        agent=agent,
        instance=instance,
        cursor=cursor,
    )
    if not items:
        console.print("no inputs waiting" if status is InputFilter.PENDING else "no inputs")
    for item in items:
        console.print(
            f"{item['inputId']}  {item['status']:8}  "
            f"{escape(item['agent'])}/{escape(item['instance'])}/{escape(item['session'])}  "
            f"{escape(_client.describe_input(item))}{escape(describe_answer(item))}"
        )
    if next_cursor:
        console.print(f"more: add --cursor {next_cursor}")


def describe_answer(item: dict[str, Any]) -> str:
    """``  -> "Ann" by ann (ann@acme, acme) at <time>`` for an answered input (the verified
    subject and tenant when the server knew them), ``  closed at <time>`` for a closed one,
    nothing for a pending one."""
    if item.get("status") == "answered":
        when = f" at {item['answeredAt']}" if item.get("answeredAt") else ""
        value = one_line(json.dumps(item.get("answer"), ensure_ascii=False))
        return f"  -> {value} by {item.get('responder')}{_client.verified(item)}{when}"
    return f"  closed at {item['closedAt']}" if item.get("closedAt") else ""


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
    body = {"value": value if text else parse_value(value), "responder": responder}
    with _client.connect(url, auth_token) as client:
        _client.check(client.post(f"/inputs/{input_id}", json=body))
    console.print(f"answered {input_id}")
