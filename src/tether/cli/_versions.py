"""``tether agents``, ``tether versions`` and ``tether sessions upgrade``: the agents a server
runs with their versions, where a rolling deploy stands, and moving parked runs to a newer
version (docs/versions.md)."""

from __future__ import annotations

import typer
from rich.console import Console

from tether.cli import _client
from tether.cli._sessions import TOKEN, URL, aligned

__all__ = ("agents", "upgrade", "versions")

console = Console(soft_wrap=True, highlight=False, emoji=False)


def agents(url: str = URL, auth_token: str | None = TOKEN) -> None:
    """List the agents the server runs: each one's newest version (new runs start on it),
    the older versions it still runs, and its version policy."""
    with _client.connect(url, auth_token) as client:
        page = _client.check(client.get("/agents"))
    items = page["agents"]
    if not items:
        console.print("no agents")
        return
    rows = [["agent", "version", "policy", "also runs", "delegates to"]]
    for item in items:
        older = item["versions"][1:]
        rows.append(
            [
                item["name"],
                item["version"],
                item["policy"],
                ", ".join(older) or "-",
                ", ".join(item["delegatesTo"]) or "-",
            ]
        )
    for line in aligned(rows):
        console.print(line, markup=False)


def versions(
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's."),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """List each agent's versions with their live workers, unsettled runs and parked gates:
    a version with nothing left to run can be retired."""
    params = {"agent": agent} if agent is not None else {}
    with _client.connect(url, auth_token) as client:
        page = _client.check(client.get("/versions", params=params))
    items = page["versions"]
    if not items:
        console.print("no versions")
        return
    rows = [["agent", "version", "here", "workers", "queued", "running", "waiting", "gates", ""]]
    for item in items:
        here = "newest" if item["newestHere"] else "runs" if item["servedHere"] else "-"
        rows.append(
            [
                item["agent"],
                item.get("version") or "(unversioned)",
                here,
                str(item["workers"]),
                str(item["queued"]),
                str(item["running"]),
                str(item["waiting"]),
                str(item["gates"]),
                "retirable" if item["retirable"] else "",
            ]
        )
    for line in aligned(rows):
        console.print(line, markup=False)


def upgrade(
    agent: str = typer.Option(..., "--agent", help="The agent whose parked runs move."),
    from_version: str = typer.Option(..., "--from", help="The version they started on."),
    to_version: str = typer.Option(
        ..., "--to", help="The version they go on with: one the server runs."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Move an agent's parked runs (waiting, or queued for a worker of their version) from
    one version to another: each goes on with the newer code from its recorded prefix, and
    its log records the move."""
    body = {"agent": agent, "fromVersion": from_version, "toVersion": to_version}
    with _client.connect(url, auth_token) as client:
        answer = _client.check(client.post("/versions/upgrade", json=body))
    moved = answer["moved"]
    for submission_id in moved:
        console.print(f"moved {submission_id}")
    console.print(f"{len(moved)} run(s) of {agent} moved from {from_version} to {to_version}")
