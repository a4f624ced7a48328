"""Retention from the command line: ``--retain-days`` and ``--keep-records`` on ``tether serve``
and ``tether worker`` (their pruner applies them), and ``tether prune`` for one pass now, or a
``--dry-run`` that shows what would go (docs/retention.md)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from tether.cli._exit import fail
from tether.cli._stores import open_store_or_fail
from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.engine import PruneReport, Retention

__all__ = ("KEEP_RECORDS", "PRUNE_EVERY", "RETAIN_DAYS", "prune", "retention_of")

RETAIN_DAYS = typer.Option(
    None,
    "--retain-days",
    metavar="[AGENT=]DAYS",
    help="Erase sessions idle longer than DAYS; AGENT=DAYS for one agent's "
    "(AGENT=forever keeps them). Repeatable. Sessions with work in flight are kept.",
)
KEEP_RECORDS = typer.Option(
    None,
    "--keep-records",
    min=1,
    metavar="RECORDS",
    help="Cut the head of logs longer than this (by a quarter), keeping their latest "
    "records; the session stays verifiable, resumable and replayable.",
)
PRUNE_EVERY = typer.Option(
    3600.0, "--prune-every", min=1.0, help="Seconds between the pruner's passes."
)
_FOREVER = "forever"


def retention_of(
    retain_days: list[str] | None, keep_records: int | None, every: float = 3600.0
) -> Retention | None:
    """The policy the options describe (``None`` if they describe none): ``DAYS`` for every
    agent, ``AGENT=DAYS`` or ``AGENT=forever`` for one; each agent's policy keeps
    ``keep_records`` too."""
    from tether.engine import Retention

    default: timedelta | None = None
    agents: dict[str, timedelta | None] = {}
    for given in retain_days or ():
        name, _, days = given.rpartition("=")
        idle = _days(days, given)
        if name:
            agents[name] = idle
        elif idle is None:
            raise typer.BadParameter(
                f"{given!r}: forever is for one agent (AGENT=forever)", param_hint="--retain-days"
            )
        else:
            default = idle
    if default is None and not agents and keep_records is None:
        return None
    interval = timedelta(seconds=every)
    return Retention(
        erase_after_idle=default,
        keep_records=keep_records,
        agents={
            name: Retention(erase_after_idle=idle, keep_records=keep_records, every=interval)
            for name, idle in agents.items()
        },
        every=interval,
    )


def _days(text: str, given: str) -> timedelta | None:
    if text == _FOREVER:
        return None
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not days > 0 or days == float("inf"):
        raise typer.BadParameter(
            f"{given!r}: give DAYS (a positive number) or AGENT=DAYS or AGENT=forever",
            param_hint="--retain-days",
        )
    return timedelta(days=days)


def prune(
    store_url: str,
    retain_days: list[str] | None,
    keep_records: int | None,
    *,
    dry_run: bool,
    console: Console,
) -> None:
    """One pass of the policy the options give over the store ``store_url`` names."""
    retention = retention_of(retain_days, keep_records)
    if retention is None:
        raise typer.BadParameter("give --retain-days and/or --keep-records: what should go?")

    async def run() -> PruneReport:
        from tether.engine import Runtime

        async with await open_store_or_fail(store_url, create=False) as store:
            runtime = Runtime({}, store)
            await runtime.start(worker=False)
            try:
                return await runtime.prune(retention, dry_run=dry_run)
            finally:
                await runtime.close()

    try:
        report = asyncio.run(run())
    except TetherError as exc:
        fail(f"{exc.code}: {exc}")
    _show(report, console)


def _show(report: PruneReport, console: Console) -> None:
    from tether.cli._sessions import size_of

    if not report.outcomes:
        console.print(f"nothing to prune among {report.scanned} session(s)")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("action", "session", "records", "size", "removed", "after", "last activity"):
        table.add_column(column)
    for outcome in report.outcomes:
        key = outcome.key
        action = outcome.action.value if outcome.skipped is None else f"kept ({outcome.skipped})"
        after = "" if outcome.bytes_after is None else size_of(outcome.bytes_after)
        if outcome.through_seq is not None and outcome.skipped is None:
            after = f"from seq {outcome.through_seq}" + (f", {after}" if after else "")
        table.add_row(
            action,
            f"{key.agent}/{key.instance}/{key.session}",
            str(outcome.records),
            size_of(outcome.bytes),
            str(outcome.removed),
            after,
            outcome.last_activity_at.isoformat()[:19].replace("T", " "),
        )
    console.print(table)
    erased, truncated = report.erased, report.truncated
    summary = (
        f"would erase {erased} session(s) and truncate {truncated} log(s) of "
        f"{report.scanned} (dry run: nothing was removed)"
        if report.dry_run
        else f"erased {erased} session(s) and truncated {truncated} log(s) of {report.scanned}"
    )
    console.print(summary)
