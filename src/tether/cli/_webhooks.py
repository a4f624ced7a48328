"""``tether webhooks``: the outbound webhook deliveries a server keeps (``list``), one of
them with the JSON it sends (``show``), and sending one again (``resend``)
(docs/how-to/webhooks.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from tether._states import WebhookStatus
from tether.cli._connect import DEFAULT_URL, TOKEN, connect
from tether.cli._help import WholeSummaries
from tether.cli._sessions import aligned

if TYPE_CHECKING:
    from tether.wire import WebhookDeliveryItem

__all__ = ("webhooks_app",)

console = Console(soft_wrap=True, highlight=False, emoji=False)
URL = typer.Option(DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to talk to.")

webhooks_app = typer.Typer(
    cls=WholeSummaries,
    help="The outbound webhook deliveries: list them, show one, resend one.",
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


STATUS = typer.Option(None, "--status", help="Only deliveries in it.")


def _time(value: str | None) -> str:
    return "-" if not value else value[:19].replace("T", " ") + value[19:].replace("+00:00", "Z")


def _outcome(item: WebhookDeliveryItem) -> str:
    if item.last_error:
        return item.last_error
    if item.last_status is not None:
        return f"HTTP {item.last_status}"
    return "-"


@webhooks_app.command("list")
def list_deliveries(
    status: WebhookStatus | None = STATUS,
    submission: str | None = typer.Option(None, "--submission", help="Only this submission's."),
    limit: int = typer.Option(50, "--limit", min=1, max=500, help="At most this many."),
    after: str | None = typer.Option(
        None, "--after", help="Where the previous page said the next one starts."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """List the deliveries, oldest first: status, attempts, the last answer."""
    with connect(url, auth_token) as client:
        page = client.webhook_deliveries(
            status=status,
            submission_id=submission,
            limit=limit,
            after=after,
        )
    items = page.deliveries
    if not items:
        console.print("no webhook deliveries")
    else:
        rows = [["id", "event", "status", "attempts", "submission", "url", "last", "next"]]
        for item in items:
            rows.append(
                [
                    item.id,
                    item.event,
                    item.status.value,
                    str(item.attempts),
                    item.submission_id,
                    item.url,
                    _outcome(item),
                    _time(item.next_attempt_at),
                ]
            )
        for line in aligned(rows):
            console.print(line, markup=False)
    if page.next_cursor:
        console.print(f"more: add --after {page.next_cursor}", markup=False)


@webhooks_app.command()
def show(
    delivery_id: str = typer.Argument(help="The delivery's id (see `tether webhooks list`)."),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Show a delivery, and the JSON it sends, as JSON."""
    with connect(url, auth_token) as client:
        item = client.webhook_delivery(delivery_id)
    shown = json.loads(item.to_json())  # as the wire writes it: camelCase, absent fields left out
    console.print(json.dumps(shown, indent=2, ensure_ascii=False), markup=False)


@webhooks_app.command()
def resend(
    delivery_id: str = typer.Argument(help="The delivery's id (see `tether webhooks list`)."),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Send a delivery again now, with the same id and body (a failed one, or one lost)."""
    with connect(url, auth_token) as client:
        item = client.resend_webhook(delivery_id)
    console.print(f"resending {item.id} ({item.event}) to {item.url}", markup=False)
