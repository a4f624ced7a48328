"""``tether usage``: what a tenant spent in a UTC day or month against its budget, from the
server (``GET /usage``), or read from a store directly (``--store``: the spending alone, the
budgets being the server's configuration); with ``--session``, what one session spent
against its session budget (``GET /usage?session=``)."""

from __future__ import annotations

import asyncio
import enum
from datetime import UTC, date, datetime, timedelta
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from tether.cli._connect import DEFAULT_URL, TOKEN, connect
from tether.cli._exit import ExitCode, fail
from tether.cli._stores import open_store_or_fail
from tether.errors import StoreCapabilityMissing, TetherError

__all__ = ("describe_session_usage", "describe_usage", "usage")

console = Console(soft_wrap=True, highlight=False, emoji=False)
_AMOUNTS = (
    ("modelCalls", "model calls"),
    ("tokens", "tokens"),
    ("costUsd", "USD"),
    ("toolCalls", "tool calls"),
)


class PeriodChoice(enum.StrEnum):
    DAY = "day"
    MONTH = "month"


PERIOD = typer.Option(None, "--period", help="A UTC day (the default) or month.")


def usage(
    tenant: str | None = typer.Option(
        None, "--tenant", help="Whose: your own tenant by default (an operator names one)."
    ),
    session: str | None = typer.Option(
        None,
        "--session",
        help="A session's spending against its session budget instead: its conversation id "
        "(`tether sessions` lists them). Not with --tenant, --period, --at or --store.",
    ),
    period: PeriodChoice | None = PERIOD,
    at: str | None = typer.Option(
        None, "--at", help="A day of the period (YYYY-MM-DD); today if absent."
    ),
    store: str | None = typer.Option(
        None,
        "--store",
        help="Read this store directly (sqlite:///dir, postgresql://...) instead of asking "
        "the server: the spending alone (the budgets are the server's).",
    ),
    url: str = typer.Option(
        DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to talk to."
    ),
    auth_token: str | None = TOKEN,
) -> None:
    """Show what a tenant's runs spent in a UTC day or month (model calls, tokens, cost, tool
    calls) against its budget of that period, and what is left; or, with --session, what a
    session spent against its session budget (and its open run against its own)."""
    if session is not None:
        given = {"--tenant": tenant, "--period": period, "--at": at, "--store": store}
        for name, value in given.items():
            if value is not None:
                fail(f"--session shows a session's spending: not with {name}", ExitCode.USAGE)
        with connect(url, auth_token) as client:
            answer = client.usage(session=session).model_dump(mode="json")
        for line in describe_session_usage(answer):
            console.print(escape(line))
        return
    day = _day(at)
    chosen = (period or PeriodChoice.DAY).value
    if store is not None:
        if tenant is None:
            fail("--store reads every tenant's: name one with --tenant", ExitCode.USAGE)
        report = asyncio.run(_from_store(store, tenant, chosen, day))
    else:
        # The answer in its wire form: what the renderers read, from a store's too.
        with connect(url, auth_token) as client:
            answer = client.usage(
                tenant=tenant, period="month" if chosen == "month" else "day", at=day
            )
        report = answer.model_dump(mode="json")
    for line in describe_usage(report):
        console.print(escape(line))


def _day(text: str | None) -> date | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        fail(f"--at is not a date (YYYY-MM-DD): {text!r}", ExitCode.USAGE)


async def _from_store(url: str, tenant: str, period: str, day: date | None) -> dict[str, Any]:
    from tether.store import StoreCapabilities, require_capability

    start = datetime.now(UTC).date() if day is None else day
    if period == "month":
        start = start.replace(day=1)
        end = date(start.year + (start.month == 12), start.month % 12 + 1, 1)
    else:
        end = start + timedelta(days=1)
    async with await open_store_or_fail(url, create=False) as opened:
        try:
            kept = require_capability(StoreCapabilities.of(opened).usage, "usage")
            spent = await kept.tenant_usage(tenant, start=start, end=end)
        except StoreCapabilityMissing as exc:
            fail(str(exc))
        except TetherError as exc:
            fail(f"{exc.code}: {exc}")
    return {
        "tenant": tenant,
        "period": period,
        "start": f"{start.isoformat()}T00:00:00Z",
        "end": f"{end.isoformat()}T00:00:00Z",
        "spent": {
            "modelCalls": spent.model_calls,
            "tokens": spent.tokens,
            "costUsd": round(spent.cost_usd, 6),
            "toolCalls": spent.tool_calls,
        },
        "budget": None,
        "remaining": None,
    }


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _amounts(report: dict[str, Any], indent: str = "") -> list[str]:
    """One line per amount: ``model calls  3 of 100 (97 left)``, ``tokens  1200`` (no
    limit), then ``no budget`` if there is none."""
    budget = report.get("budget") or {}
    remaining = report.get("remaining") or {}
    lines = []
    for key, name in _AMOUNTS:
        text = f"{indent}{name:12} {_number(report['spent'][key])}"
        limit = budget.get(key)
        if limit is not None:
            text += f" of {_number(limit)} ({_number(remaining.get(key))} left)"
        lines.append(text)
    if report.get("budget") is None:
        lines.append(f"{indent}no budget")
    return lines


def describe_usage(report: dict[str, Any]) -> list[str]:
    """``acme, day 2026-12-07T00:00:00Z .. 2026-12-08T00:00:00Z`` then one line per amount:
    ``model calls  3 of 100 (97 left)``, ``tokens  1200`` (no limit)."""
    lines = [f"{report['tenant']}, {report['period']} {report['start']} .. {report['end']}"]
    return lines + _amounts(report)


def describe_session_usage(report: dict[str, Any]) -> list[str]:
    """``support/acme/default (01J...)`` then one line per amount against the session budget,
    and, if its open submission has a budget, that submission's the same way, indented."""
    key = f"{report['agent']}/{report['instance']}/{report['session']}"
    lines = [f"{key} ({report['conversationId']}), all its submissions"]
    lines += _amounts(report)
    submission = report.get("submission")
    if submission is not None:
        lines.append(f"open submission {submission['submissionId']}")
        lines += _amounts(submission, indent="  ")
    return lines
