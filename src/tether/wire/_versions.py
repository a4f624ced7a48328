"""What the versions routes take and answer (docs/versions.md): each agent's versions and
what is left of them, and which parked runs an upgrade moves."""

from __future__ import annotations

from pydantic import (
    Field,
)

from tether.wire._base import RequestBody, WireResponse, optional

__all__ = (
    "UpgradeBody",
    "UpgradeResult",
    "VersionItem",
    "VersionsPage",
)


class VersionItem(WireResponse):
    """One version of one agent and what is left of it."""

    agent: str
    version: str | None = optional(
        description="Absent for runs started before the agent had versions."
    )
    newest_here: bool = Field(description="New runs on this server start on it.")
    served_here: bool = Field(description="This server runs it.")
    workers: int = Field(description="Live workers that run it (or run any version).")
    queued: int
    running: int
    waiting: int
    gates: int = Field(description="Of the waiting runs, those parked on an approval or input.")
    retirable: bool = Field(description="Nothing of it is left to run: its workers may stop.")


class VersionsPage(WireResponse):
    versions: list[VersionItem] = Field(description="By agent, newest first.")


class UpgradeBody(RequestBody):
    """Which parked runs move, and where to."""

    agent: str = Field(min_length=1, max_length=200)
    from_version: str = Field(min_length=1, max_length=200)
    to_version: str = Field(min_length=1, max_length=200, description="A version this server runs.")
    actor: str | None = Field(
        default=None, max_length=200, description="Who moves them, for the audit record."
    )


class UpgradeResult(WireResponse):
    moved: list[str] = Field(description="The submissions moved, by id.")
