"""``tether sessions`` and ``tether delete``: the sessions a server holds, and erasing one."""

from __future__ import annotations

import enum
import json
from datetime import datetime
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from tether.cli._connect import DEFAULT_URL, TOKEN, connect

if TYPE_CHECKING:
    from tether.wire import SessionItem

__all__ = ("aligned", "delete", "metadata_filters", "sessions", "size_of")

console = Console(soft_wrap=True, highlight=False, emoji=False)
URL = typer.Option(DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to talk to.")


class SessionFilter(enum.StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    WAITING = "waiting"
    FAILED = "failed"


STATUS = typer.Option(None, "--status", help="Only sessions in it.")


def size_of(count: int) -> str:
    """A byte count as people read it (``512 B``, ``3.2 MiB``)."""
    if count < 1024:
        return f"{count} B"
    size = float(count)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


def sessions(
    ctx: typer.Context,
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's."),
    instance: str | None = typer.Option(
        None, "--instance", help="Only this instance's (needs --agent)."
    ),
    status: SessionFilter | None = STATUS,
    limit: int = typer.Option(50, "--limit", min=1, max=500, help="At most this many."),
    cursor: str | None = typer.Option(
        None, "--cursor", help="Where the previous page said the next one starts."
    ),
    usage: bool = typer.Option(False, "--usage", help="Total each session's model calls too."),
    q: str | None = typer.Option(
        None, "--q", help="Only those one of whose messages holds every word of this."
    ),
    meta: list[str] = typer.Option(  # noqa: B008 (typer's way of a repeated option)
        [], "--meta", help="KEY=VALUE: only those whose metadata holds it (repeatable)."
    ),
    since: str | None = typer.Option(
        None, "--since", help="Only those active since this time (ISO 8601, with an offset)."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """List sessions, newest activity first: each one's conversation id, where it stands and
    its metadata; searched by the words of their messages (--q), their metadata (--meta)
    and their last activity (--since). (`tether sessions upgrade` moves parked runs to a
    newer version.)"""
    if ctx.invoked_subcommand is not None:
        return
    from tether.wire import SessionState

    metadata = metadata_filters(meta)
    active_since = None if since is None else _time_of(since)
    with connect(url, auth_token) as client:
        page = client.sessions(
            agent=agent,
            instance=instance,
            status=None if status is None else SessionState(status.value),
            limit=limit,
            cursor=cursor,
            usage=usage,
            q=q,
            metadata=metadata or None,
            since=active_since,
        )
    items = page.sessions
    if not items:
        console.print("no sessions")
        return
    header = ["session", "conversation", "status", "records", "size", "approvals", "inputs"]
    header += ["last activity", *(["model calls"] if usage else [])]
    rows = [header]
    for item in items:
        row = [
            f"{item.agent}/{item.instance}/{item.session}",
            item.conversation_id,
            _status(item),
            str(item.records),
            size_of(item.bytes),
            str(item.pending_approvals or ""),
            str(item.pending_inputs or ""),
            item.last_activity_at[:19].replace("T", " "),
        ]
        if usage:
            row.append(str(0 if item.usage is None else item.usage.calls))
        notes = [
            f"{key}={value}" if isinstance(value, str) else f"{key}={json.dumps(value)}"
            for key, value in item.metadata.items()
        ]
        if item.parent is not None:
            notes.append(f"(from {item.parent.reason} of {item.parent.conversation_id})")
        if notes:
            row.append(" ".join(notes))
        rows.append(row)
    for line in aligned(rows):
        console.print(line, markup=False)
    if page.next_cursor:
        console.print(f"more: add --cursor {page.next_cursor}")


def metadata_filters(meta: list[str]) -> dict[str, str]:
    """``--meta KEY=VALUE`` options as the metadata filters of ``client.sessions`` (each
    the query's ``metadata.KEY=VALUE`` parameter)."""
    filters: dict[str, str] = {}
    for given in meta:
        key, equals, value = given.partition("=")
        if not equals or not key:
            raise typer.BadParameter(f"{given!r} is not KEY=VALUE", param_hint="--meta")
        filters[key] = value
    return filters


def _time_of(given: str) -> datetime:
    """``--since``'s ISO 8601 time, with its offset (``Z`` or ``+02:00``)."""
    try:
        moment = datetime.fromisoformat(given)
    except ValueError:
        raise typer.BadParameter(
            f"{given!r} is not an ISO 8601 time", param_hint="--since"
        ) from None
    if moment.tzinfo is None:
        raise typer.BadParameter(f"{given!r} has no offset (add Z or +HH:MM)", param_hint="--since")
    return moment


def _status(item: SessionItem) -> str:
    """``waiting (limit: agent)``: what a waiting session waits for beside its status."""
    reason = item.wait_reason
    if reason is None:
        return str(item.status)
    held = item.held_by
    return f"{item.status} ({reason}: {held})" if held else f"{item.status} ({reason})"


def aligned(rows: list[list[str]]) -> list[str]:
    """``rows`` as lines of left-aligned columns, each as wide as it needs: an id or a session
    key is never cut short or wrapped to fit a terminal (a pipe counts as 80 columns), so it
    copies whole into ``tether export``, ``verify`` or ``fork``. A row may have a last cell
    more than the header."""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip()
        for row in rows
    ]


def delete(
    agent: str = typer.Argument(help="The agent's name."),
    instance: str = typer.Argument(help="The agent instance."),
    session: str = typer.Option("default", "--session", help="The session of the instance."),
    force: bool = typer.Option(
        False, "--force", help="Abort what is unsettled first (else a busy session is refused)."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Erase a session for good: its log, submissions, snapshot and unshared attachments."""
    with connect(url, auth_token) as client:
        erased = client.erase(agent, instance, session=session, force=force)
    console.print(
        f"erased {erased.agent}/{erased.instance}/{erased.session} "
        f"({erased.conversation_id}): {erased.records} records, "
        f"{erased.submissions} submissions, {len(erased.attachments)} attachments"
        + (", its snapshot" if erased.snapshot else "")
    )
