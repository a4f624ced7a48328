"""A rolling deploy over HTTP (docs/versions.md): ``GET /versions`` lists each agent's
versions with their live workers, unsettled runs and parked gates; ``POST /versions/upgrade``
moves an agent's parked runs from one version to a newer one."""

from __future__ import annotations

from fastapi import APIRouter, Query
from pydantic import Field

from tether.http._dependencies import RuntimeDependency
from tether.http._errors import BODY_FAILURES, failures
from tether.http._requests import RequestBody
from tether.http._responses import WireResponse, optional

__all__ = ("UpgradeBody", "UpgradeResult", "VersionItem", "VersionsPage", "versions_router")


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


versions_router = APIRouter(tags=["versions"])


@versions_router.get("/versions", responses=failures(422, 501))
async def list_versions(
    runtime: RuntimeDependency,
    agent: str | None = Query(default=None, max_length=200, description="Only this agent's."),
) -> VersionsPage:
    """Each agent's versions: live workers, unsettled runs, parked gates."""
    states = await runtime.version_states(agent)
    return VersionsPage(
        versions=[
            VersionItem(
                agent=s.agent,
                version=s.version,
                newest_here=s.newest_here,
                served_here=s.served_here,
                workers=s.workers,
                queued=s.queued,
                running=s.running,
                waiting=s.waiting,
                gates=s.gates,
                retirable=s.retirable,
            )
            for s in states
        ]
    )


@versions_router.post("/versions/upgrade", responses=failures(*BODY_FAILURES, 404, 409, 501))
async def upgrade_versions(runtime: RuntimeDependency, body: UpgradeBody) -> UpgradeResult:
    """Move the agent's parked runs from one version to another this server runs: each goes
    on with the newer code from its recorded prefix, its log recording who moved it."""
    moved = await runtime.upgrade_parked(
        body.agent, from_version=body.from_version, to_version=body.to_version, actor=body.actor
    )
    return UpgradeResult(moved=moved)
