"""``tether webhooks``: the outbound webhook deliveries a server keeps (``list``), one of
them with the JSON it sends (``show``), and sending one again (``resend``)
(docs/how-to/webhooks.md)."""

from __future__ import annotations

import enum
import json
from typing import Any
from urllib.parse import quote

import typer
from rich.console import Console

from tether.cli import _client
from tether.cli._help import WholeSummaries
from tether.cli._sessions import aligned

__all__ = ("webhooks_app",)

console = Console(soft_wrap=True, highlight=False, emoji=False)
URL = typer.Option(_client.DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to talk to.")
TOKEN = _client.TOKEN

webhooks_app = typer.Typer(
    cls=WholeSummaries,
    help="The outbound webhook deliveries: list them, show one, resend one.",
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


class Status(enum.StrEnum):
    HELD = "held"
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    CLOSED = "closed"


STATUS = typer.Option(None, "--status", help="Only deliveries in it.")


def _time(value: str | None) -> str:
    return "-" if not value else value[:19].replace("T", " ") + value[19:].replace("+00:00", "Z")


def _outcome(item: dict[str, Any]) -> str:
    if item.get("lastError"):
        return str(item["lastError"])
    if item.get("lastStatus") is not None:
        return f"HTTP {item['lastStatus']}"
    return "-"


@webhooks_app.command("list")
def list_deliveries(
    status: Status | None = STATUS,
    submission: str | None = typer.Option(None, "--submission", help="Only this submission's."),
    limit: int = typer.Option(50, "--limit", min=1, max=500, help="At most this many."),
    after: str | None = typer.Option(
        None, "--after", help="Where the previous page said the next one starts."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """List the deliveries, oldest first: status, attempts, the last answer."""
    params: dict[str, Any] = {"limit": limit}
    given = {"status": status.value if status else None, "submissionId": submission, "after": after}
    params |= {name: value for name, value in given.items() if value is not None}
    with _client.connect(url, auth_token) as client:
        page = _client.check(client.get("/webhook-deliveries", params=params))
    items = page["deliveries"]
    if not items:
        console.print("no webhook deliveries")
    else:
        rows = [["id", "event", "status", "attempts", "submission", "url", "last", "next"]]
        for item in items:
            rows.append(
                [
                    item["id"],
                    item["event"],
                    item["status"],
                    str(item["attempts"]),
                    item["submissionId"],
                    item["url"],
                    _outcome(item),
                    _time(item.get("nextAttemptAt")),
                ]
            )
        for line in aligned(rows):
            console.print(line, markup=False)
    if page.get("nextCursor"):
        console.print(f"more: add --after {page['nextCursor']}", markup=False)


@webhooks_app.command()
def show(
    delivery_id: str = typer.Argument(help="The delivery's id (see `tether webhooks list`)."),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Show a delivery, and the JSON it sends, as JSON."""
    with _client.connect(url, auth_token) as client:
        item = _client.check(client.get(f"/webhook-deliveries/{quote(delivery_id, safe='')}"))
    console.print(json.dumps(item, indent=2, ensure_ascii=False), markup=False)


@webhooks_app.command()
def resend(
    delivery_id: str = typer.Argument(help="The delivery's id (see `tether webhooks list`)."),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Send a delivery again now, with the same id and body (a failed one, or one lost)."""
    path = f"/webhook-deliveries/{quote(delivery_id, safe='')}/resend"
    with _client.connect(url, auth_token) as client:
        item = _client.check(client.post(path, json={}))
    console.print(f"resending {item['id']} ({item['event']}) to {item['url']}", markup=False)
