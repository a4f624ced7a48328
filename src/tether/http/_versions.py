"""A rolling deploy over HTTP (docs/versions.md): ``GET /versions`` lists each agent's
versions with their live workers, unsettled runs and parked gates; ``POST /versions/upgrade``
moves an agent's parked runs from one version to a newer one."""

from __future__ import annotations

from fastapi import APIRouter, Query

from tether.http._dependencies import RuntimeDependency
from tether.http._errors import BODY_FAILURES, failures
from tether.wire import UpgradeBody, UpgradeResult, VersionItem, VersionsPage

__all__ = ("versions_router",)


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
