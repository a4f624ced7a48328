"""A rolling deploy as an operator sees it: which versions of each agent have runs and
workers, whether a run waits for a worker of its version, and moving parked runs to a newer
version by hand (docs/versions.md).

The store keeps the truth: each submission's version (stamped by the claim that started
it) and the versions each worker announced. A worker is live while its liveness lock is
held (``OwnerLiveness``); without liveness, every announced worker counts as live."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from tether.engine._context import EngineContext
from tether.errors import UnknownVersion
from tether.journal import Journal
from tether.records import VersionChanged
from tether.store import (
    Submission,
    SubmissionStatus,
    WorkerRow,
    require_capability,
    served_version,
)

__all__ = (
    "NO_WORKER_FOR_VERSION",
    "VersionState",
    "live_workers",
    "upgrade_parked",
    "version_states",
    "waits_for_a_worker",
)

NO_WORKER_FOR_VERSION = "no_worker_for_version"
"""The reason a queued run shows as waiting: no live worker runs its agent, or the version it
started on."""

_GATES = ("approval", "input")


@dataclass(frozen=True, slots=True)
class VersionState:
    """One version of one agent: whether this process runs it, how many live workers serve
    it, and its unsettled runs (``gates``: the waiting ones parked on a person)."""

    agent: str
    version: str | None
    newest_here: bool
    served_here: bool
    workers: int
    queued: int = 0
    running: int = 0
    waiting: int = 0
    gates: int = 0

    @property
    def retirable(self) -> bool:
        """Nothing of it is left to run: its workers may stop."""
        return self.queued + self.running + self.waiting == 0


async def live_workers(context: EngineContext) -> list[WorkerRow]:
    """The workers that announced their versions and still hold their liveness."""
    store = require_capability(context.capabilities.versions, "versions")
    workers = await store.list_workers()
    liveness = context.capabilities.liveness
    if liveness is None or not workers:
        return workers
    others = [w.owner_id for w in workers if w.owner_id != context.config.owner_id]
    dead = await liveness.dead_owners(others) if others else set()
    return [w for w in workers if w.owner_id not in dead]


def waits_for_a_worker(submission: Submission, workers: Sequence[WorkerRow]) -> bool:
    """A queued run that none of the live ``workers`` may claim, by the store's own rule
    (``served_version``): none runs its agent, or the version it started on."""
    if submission.status is not SubmissionStatus.QUEUED or not workers:
        return False
    key, version = submission.key, submission.version
    return all(served_version(key.agent, version, worker.serves) is None for worker in workers)


async def version_states(context: EngineContext, agent: str | None = None) -> list[VersionState]:
    """Every version with unsettled runs or live workers, and every version this process
    runs, by agent then newest first here (others after, by name)."""
    store = require_capability(context.capabilities.versions, "versions")
    counts = await store.version_counts(agent)
    workers = await live_workers(context)
    workers_of: dict[tuple[str, str], int] = defaultdict(int)
    for worker in workers:
        for name, versions in worker.serves.items():
            for version in versions:
                workers_of[(name, version)] += 1
    runs: dict[tuple[str, str | None], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for count in counts:
        tally = runs[(count.agent, count.version)]
        tally[count.status] += count.count
        if count.wait_reason in _GATES:
            tally["gates"] += count.count
    keys: set[tuple[str, str | None]] = set(runs)
    for name in context.versions.agents():
        keys.update((name, v.version) for v in context.versions.of(name))
    keys.update((name, version) for name, version in workers_of if version != "*")
    if agent is not None:
        keys = {key for key in keys if key[0] == agent}

    def order(key: tuple[str, str | None]) -> tuple[str, int, str]:
        name, version = key
        here = [v.version for v in context.versions.of(name)]
        rank = here.index(version) if version in here else len(here)
        return name, rank, version or ""

    states: list[VersionState] = []
    for name, listed in sorted(keys, key=order):
        tally = runs.get((name, listed), {})
        newest = context.versions.newest(name)
        states.append(
            VersionState(
                agent=name,
                version=listed,
                newest_here=newest is not None and newest.version == listed,
                served_here=context.versions.find(name, listed) is not None,
                workers=workers_of.get((name, listed or ""), 0) + workers_of.get((name, "*"), 0),
                queued=tally.get("queued", 0),
                running=tally.get("running", 0),
                waiting=tally.get("waiting", 0),
                gates=tally.get("gates", 0),
            )
        )
    return states


async def upgrade_parked(
    context: EngineContext,
    agent: str,
    *,
    from_version: str,
    to_version: str,
    actor: str | None = None,
) -> list[str]:
    """Move ``agent``'s runs parked on ``from_version`` (waiting, or queued for a worker of
    it) to ``to_version``, which this process must run: each goes on with the newer code
    from its recorded prefix, as under the ``upgrade`` policy, and its log records who moved
    it (``version_changed``, reason ``operator``). The ids of the runs moved.

    The version moves first (a compare-and-set on a run that is not running), then the
    record: a crash between the two leaves a run whose first divergence records the change
    itself (reason ``upgrade``)."""
    if context.versions.find(agent, to_version) is None:
        known = ", ".join(v.version for v in context.versions.of(agent)) or "none"
        raise UnknownVersion(
            f"this server does not run version {to_version!r} of agent {agent!r} (it runs: {known})"
        )
    store = require_capability(context.capabilities.versions, "versions")
    moved: list[str] = []
    for status in (SubmissionStatus.WAITING, SubmissionStatus.QUEUED):
        for submission in await context.store.list_submissions(status):
            if submission.key.agent != agent or submission.version != from_version:
                continue
            await store.set_version(submission.id, expected=from_version, version=to_version)
            journal = await Journal.open(
                context.store, submission.conversation_id, capabilities=context.capabilities
            )
            if await journal.pending() is not None:
                await journal.record_version_change(
                    VersionChanged(
                        from_version=from_version,
                        to_version=to_version,
                        reason="operator",
                        actor=actor,
                    )
                )
            moved.append(submission.id)
    return moved
