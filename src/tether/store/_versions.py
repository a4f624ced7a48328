"""Agent versions in the store: which versions a worker serves, the rule by which a claim
takes a head and stamps its version, and what the ``versions`` capability lists (counts of
unsettled submissions by version, the workers and what they serve).

A submission's ``version`` is the agent version it runs on. Admission leaves it ``None``;
the claim that starts it stamps the newest version the claiming worker serves; a later
claim keeps it, so a started run is only ever resumed by a worker that serves its version
(or one that serves ``"*"`` for its agent, which takes it over onto its newest version).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, TypeAlias

from tether._canonical import canonical_json

__all__ = (
    "ANY_VERSION",
    "VersionCount",
    "VersionsServed",
    "WorkerRow",
    "check_serves",
    "check_version",
    "count_order",
    "frozen_serves",
    "served_version",
    "serves_json",
)

ANY_VERSION: Final = "*"
"""In a worker's list of versions: any version of that agent (a run on a version it does
not list is taken over onto the first version listed)."""

VersionsServed: TypeAlias = Mapping[str, Sequence[str]]
"""What a worker runs: agent name -> the versions it has code for, newest first. The entry
``"*"`` matches any version. Example: ``{"assistant": ["v2", "v1"], "triage": ["t3", "*"]}``."""


@dataclass(frozen=True, slots=True)
class VersionCount:
    """How many unsettled submissions (queued, running, waiting) of ``agent`` stand on
    ``version`` (``None``: not started by a versioned claim yet) in ``status``, waiting for
    ``wait_reason`` (``None`` unless waiting, or queued after a wait)."""

    agent: str
    version: str | None
    status: str
    wait_reason: str | None
    count: int


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """A worker as it said what it serves (``VersionStore.put_worker``): its owner id, its
    versions by agent (newest first), and since when it has served exactly these."""

    owner_id: str
    serves: Mapping[str, tuple[str, ...]]
    since: datetime


def check_version(version: str) -> None:
    """``ValueError`` unless ``version`` may be stored as a submission's version: a
    non-empty string, and not the wildcard."""
    if not isinstance(version, str) or not version or version == ANY_VERSION:
        raise ValueError(f"a version must be a non-empty string other than '*', not {version!r}")


def check_serves(serves: VersionsServed) -> None:
    """``ValueError`` unless ``serves`` is well formed: agent names are non-empty strings,
    each maps to a non-empty list of versions (not a string), every version a non-empty
    string, the first one no wildcard (it is what a claim stamps). Every versioned claim
    checks it: the plain types a worker passes are checked without asking an ABC."""
    if type(serves) is not dict and not isinstance(serves, Mapping):
        raise ValueError(f"serves must map agent names to versions, not {type(serves).__name__}")
    for agent, versions in serves.items():
        if not agent or (type(agent) is not str and not isinstance(agent, str)):
            raise ValueError(f"an agent name must be a non-empty string, not {agent!r}")
        if type(versions) is not list and type(versions) is not tuple:
            if isinstance(versions, str | bytes) or not isinstance(versions, Sequence):
                raise ValueError(f"the versions of {agent!r} must be a list, not {versions!r}")
        if not versions:
            raise ValueError(f"the versions of {agent!r} must not be empty")
        for version in versions:
            if not version or (type(version) is not str and not isinstance(version, str)):
                raise ValueError(
                    f"the versions of {agent!r} must be non-empty strings: {versions!r}"
                )
        if versions[0] == ANY_VERSION:
            raise ValueError(f"the first version of {agent!r} is what a claim stamps: not '*'")


def served_version(agent: str, version: str | None, serves: VersionsServed) -> str | None:
    """The version a head of ``agent`` standing on ``version`` runs on when claimed by a
    worker that serves ``serves``, or ``None`` when that worker may not claim it: its own
    version if listed, else (unversioned, or matched only by ``"*"``) the newest served."""
    versions = serves.get(agent)
    if versions is None:
        return None
    if version is not None and version in versions:
        return version
    if version is None or ANY_VERSION in versions:
        return versions[0]
    return None


def frozen_serves(serves: VersionsServed) -> dict[str, tuple[str, ...]]:
    """``serves`` as a fresh dict of tuples, agents in name order: no caller can change what
    a store keeps, and every backend hands back the same value."""
    return {agent: tuple(serves[agent]) for agent in sorted(serves)}


def serves_json(serves: VersionsServed) -> bytes:
    """The canonical JSON a store keeps ``serves`` as (an object of lists)."""
    return canonical_json({agent: list(versions) for agent, versions in serves.items()})


def count_order(count: VersionCount) -> tuple[str, bool, str, str, bool, str]:
    """The order ``version_counts`` lists its rows in, on every backend: by agent, version
    (``None`` first), status and wait reason (``None`` first), compared as code points."""
    return (
        count.agent,
        count.version is not None,
        count.version or "",
        count.status,
        count.wait_reason is not None,
        count.wait_reason or "",
    )
