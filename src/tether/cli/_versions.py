"""``tether agents``, ``tether versions`` and ``tether sessions upgrade``: the agents a server
runs with their versions, where a rolling deploy stands, and moving parked runs to a newer
version (docs/versions.md)."""

from __future__ import annotations

import typer
from rich.console import Console

from tether.cli._connect import TOKEN, connect, request_body
from tether.cli._sessions import URL, aligned

__all__ = ("agents", "upgrade", "versions")

console = Console(soft_wrap=True, highlight=False, emoji=False)


def agents(url: str = URL, auth_token: str | None = TOKEN) -> None:
    """List the agents the server runs: each one's newest version (new runs start on it),
    the older versions it still runs, and its version policy."""
    with connect(url, auth_token) as client:
        items = client.agents().agents
    if not items:
        console.print("no agents")
        return
    rows = [["agent", "version", "policy", "also runs", "delegates to"]]
    for item in items:
        rows.append(
            [
                item.name,
                item.version,
                item.policy,
                ", ".join(item.versions[1:]) or "-",
                ", ".join(item.delegates_to) or "-",
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
    with connect(url, auth_token) as client:
        items = client.versions(agent=agent).versions
    if not items:
        console.print("no versions")
        return
    rows = [["agent", "version", "here", "workers", "queued", "running", "waiting", "gates", ""]]
    for item in items:
        here = "newest" if item.newest_here else "runs" if item.served_here else "-"
        rows.append(
            [
                item.agent,
                item.version or "(unversioned)",
                here,
                str(item.workers),
                str(item.queued),
                str(item.running),
                str(item.waiting),
                str(item.gates),
                "retirable" if item.retirable else "",
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
    from tether.wire import UpgradeBody

    body = {"agent": agent, "fromVersion": from_version, "toVersion": to_version}
    upgrade = request_body(UpgradeBody, body)
    with connect(url, auth_token) as client:
        moved = client.upgrade_versions(upgrade).moved
    for submission_id in moved:
        console.print(f"moved {submission_id}")
    console.print(f"{len(moved)} run(s) of {agent} moved from {from_version} to {to_version}")
