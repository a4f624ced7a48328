"""``tether replay --against``: the deploy gate. Recorded sessions replayed against the newest
version of each agent the app defines (``Runtime.check_upgrade``), a line for each, and a
failing exit when a session a run would resume diverges (docs/versions.md, "The deploy
gate")."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from tether.cli._exit import ExitCode, fail, one_line
from tether.cli._stores import open_store_or_fail
from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.engine import AppAgents, UpgradeCheck

__all__ = ("describe", "gate", "parse_since", "summary")

_AGO = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``--since``: an ISO 8601 time (UTC unless it says otherwise) or a span back from now
    (``90m``, ``2h``, ``3d``, ``1w``). Bad usage otherwise."""
    now = now or datetime.now(UTC)
    ago = _AGO.fullmatch(text.strip())
    if ago is not None:
        amount, unit = int(ago.group(1)), ago.group(2)
        return now - timedelta(**{_UNITS[unit]: amount})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        fail(
            f"--since {text}: give an ISO 8601 time (2026-05-01T12:00Z) or a span (2h, 3d)",
            ExitCode.USAGE,
        )
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def describe(check: UpgradeCheck) -> str:
    """One session's line: its key and conversation, the versions, and the verdict."""
    where = f"at seq {check.seq}" if check.seq is not None else ""
    what = ", ".join(check.differs) or check.detail
    if check.verdict == "compatible":
        verdict = "compatible"
    elif check.verdict == "diverged":
        verdict = " ".join(("diverged", where)).strip() + f": {what}"
    else:  # what the code did instead says more than the pins, which may not differ
        verdict = " ".join(("needs a patch", where)).strip() + f": {check.detail}"
    if check.verdict != "compatible":
        verdict += "; a run would resume it" if check.pending else "; nothing would resume it"
    versions = f"{check.recorded_version or 'unversioned'} -> {check.version}"
    return one_line(f"{check.key} ({check.conversation_id}, {versions}): {verdict}")


def gate(
    agents: AppAgents,
    store_url: str,
    console: Console,
    *,
    agent: str | None,
    version: str | None,
    since: datetime | None,
    limit: int,
) -> None:
    """Check the sessions and print them; exit :attr:`ExitCode.FAILED` when any that a run
    would resume diverged."""
    from tether.engine import Runtime

    async def run() -> list[UpgradeCheck]:
        async with await open_store_or_fail(store_url, create=False) as store:
            try:
                runtime = Runtime(agents, store)
            except (TypeError, ValueError) as exc:
                fail(f"--against: {one_line(exc)}", ExitCode.BAD_APP)
            await runtime.start(worker=False)  # reads only: no claims, no schedules
            try:
                return await runtime.check_upgrade(
                    agent=agent, version=version, since=since, limit=limit
                )
            finally:
                await runtime.close()

    try:
        checks = asyncio.run(run())
    except TetherError as exc:
        fail(f"{exc.code}: {exc}")
    for check in checks:
        console.print(escape(describe(check)))
    console.print(escape(summary(checks)))
    if any(check.blocks for check in checks):
        raise typer.Exit(int(ExitCode.FAILED))


def summary(checks: Sequence[UpgradeCheck]) -> str:
    if not checks:
        return "no recorded sessions to check"
    counts = dict.fromkeys(("compatible", "diverged", "needs_patch"), 0)
    for check in checks:
        counts[check.verdict] += 1
    blocking = sum(check.blocks for check in checks)
    sessions = "session" if len(checks) == 1 else "sessions"
    line = (
        f"checked {len(checks)} {sessions}: {counts['compatible']} compatible, "
        f"{counts['diverged']} diverged, {counts['needs_patch']} need a patch; "
    )
    if blocking:
        return line + f"{blocking} that a run would resume would fail: the gate fails"
    return line + "none that a run would resume fails: the gate passes"
