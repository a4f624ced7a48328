"""``tether schedules``: the schedules a server fires, with their next window; ``add`` keeps
one in its store, ``delete`` forgets one (docs/schedules.md)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from tether.cli._connect import DEFAULT_URL, TOKEN, connect, request_body
from tether.cli._exit import ExitCode, fail
from tether.cli._help import WholeSummaries
from tether.cli._sessions import aligned

if TYPE_CHECKING:
    from tether.wire import ScheduleItem

__all__ = ("schedules_app",)

console = Console(soft_wrap=True, highlight=False, emoji=False)
URL = typer.Option(DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to talk to.")
SUB_URL = typer.Option(
    None, "--url", envvar="TETHER_URL", help="The server to talk to (or before the command)."
)

schedules_app = typer.Typer(
    cls=WholeSummaries,
    help="List the schedules (`tether schedules`), add one, delete one.",
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _when(item: ScheduleItem) -> str:
    if item.cron is not None:
        zone = item.timezone
        return f"{item.cron}" + ("" if zone == "UTC" else f" ({zone})")
    every = float(item.every or 0)
    return f"every {int(every) if every.is_integer() else every} s"


def _time(value: str | None) -> str:
    return "-" if not value else value[:19].replace("T", " ") + value[19:].replace("+00:00", "Z")


@schedules_app.callback(invoke_without_command=True)
def schedules(ctx: typer.Context, url: str = URL, auth_token: str | None = TOKEN) -> None:
    """List the schedules, each with the start of its next window (UTC)."""
    ctx.obj = (url, auth_token)  # `tether schedules --url U add ...` talks to U too
    if ctx.invoked_subcommand is not None:
        return
    with connect(url, auth_token) as client:
        items = client.schedules().schedules
    if not items:
        console.print("no schedules")
        return
    rows = [["id", "session", "when", "kind", "missed", "source", "next fire"]]
    for item in items:
        missed = f"catch up {item.catch_up}" if item.missed == "catch_up" else item.missed
        kind = item.kind if item.kind == "user" else f"signal {item.signal_type}"
        rows.append(
            [
                item.id,
                f"{item.agent}/{item.instance}/{item.session}",
                _when(item),
                kind,
                missed,
                item.source,
                _time(item.next_fire_at),
            ]
        )
    for line in aligned(rows):
        console.print(line, markup=False)


def _target(ctx: typer.Context, url: str | None, token: str | None) -> tuple[str, str | None]:
    parent_url, parent_token = ctx.obj or (DEFAULT_URL, None)
    return url or parent_url, token or parent_token


class Kind(enum.StrEnum):
    SIGNAL = "signal"
    USER = "user"


KIND = typer.Option(Kind.SIGNAL, "--kind", help="A signal, or a user message.")


@schedules_app.command()
def add(
    ctx: typer.Context,
    agent: str = typer.Argument(help="The agent's name."),
    instance: str = typer.Argument(help="The agent instance."),
    body: str = typer.Option(..., "--body", help="What each window sends."),
    cron: str | None = typer.Option(
        None, "--cron", help="When, as a cron expression (e.g. '*/5 * * * *')."
    ),
    every: float | None = typer.Option(
        None, "--every", help="Or every this many seconds (windows counted from the epoch)."
    ),
    timezone: str = typer.Option("UTC", "--timezone", help="The cron's IANA time zone."),
    session: str = typer.Option("default", "--session", help="The session of the instance."),
    kind: Kind = KIND,
    signal_type: str = typer.Option("schedule", "--signal-type", help="The signal's type."),
    catch_up: int | None = typer.Option(
        None,
        "--catch-up",
        min=1,
        help="Fire up to this many missed windows (oldest first); without it they are skipped.",
    ),
    grace: float = typer.Option(60.0, "--grace", help="Seconds a window may be seen late."),
    schedule_id: str | None = typer.Option(
        None, "--id", help="Its id (else derived from the definition)."
    ),
    url: str | None = SUB_URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Add a schedule to the server's store: every worker on it fires each window once."""
    if (cron is None) == (every is None):
        fail("give exactly one of --cron and --every", ExitCode.USAGE)
    definition: dict[str, Any] = {
        "agent": agent,
        "instance": instance,
        "session": session,
        "body": body,
        "timezone": timezone,
        "kind": kind.value,
        "missed": "skip" if catch_up is None else "catch_up",
        "grace": grace,
    }
    given = {"cron": cron, "every": every, "catchUp": catch_up, "id": schedule_id}
    definition |= {name: value for name, value in given.items() if value is not None}
    if kind is Kind.SIGNAL:
        definition["signalType"] = signal_type
    from tether.wire import ScheduleBody

    schedule = request_body(ScheduleBody, definition)
    with connect(*_target(ctx, url, auth_token)) as client:
        item = client.add_schedule(schedule)
    console.print(f"added {item.id}: next window {_time(item.next_fire_at)}", markup=False)


@schedules_app.command()
def delete(
    ctx: typer.Context,
    schedule_id: str = typer.Argument(help="The schedule's id (see `tether schedules`)."),
    url: str | None = SUB_URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Delete a schedule the server keeps in its store (its windows stop firing)."""
    with connect(*_target(ctx, url, auth_token)) as client:
        client.delete_schedule(schedule_id)
    console.print(f"deleted {schedule_id}", markup=False)
