"""Who a request is: a verified :class:`Identity` (its subject, its tenant, the scopes it
holds, the agents it may use) and the scopes there are.

An authenticator (``tether.auth``) turns a request's credential into an ``Identity``; every
route then asks it for the scope the route needs (``Identity.allows``) and shows it only its
tenant's resources.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from tether.records import Actor

__all__ = ("ALL_SCOPES", "Identity", "Scope", "check_scopes")

Scope = Literal[
    "sessions:read",
    "sessions:write",
    "sessions:abort",
    "sessions:fork",
    "sessions:erase",
    "approvals:read",
    "approvals:decide",
    "inputs:answer",
    "schedules:write",
    "metrics:read",
    "admin",
]
"""What an identity may do. ``sessions:read`` reads sessions, submissions, streams and
usage; ``sessions:write`` dispatches, steers and follows up; ``sessions:abort``,
``sessions:fork`` and ``sessions:erase`` do what they say; ``approvals:read`` lists the
approvals and ``approvals:decide`` decides them; ``inputs:answer`` answers a run's question;
``schedules:write`` creates, changes and deletes schedules; ``metrics:read`` reads
``/metrics`` (every tenant's counts: a monitoring system's scope). ``admin`` holds every scope, and
alone reaches what belongs to no tenant (the workers, the versions, an upgrade)."""

ALL_SCOPES: Final[tuple[Scope, ...]] = get_args(Scope)
"""Every scope, in the order the docs list them."""


def check_scopes(scopes: Iterable[str]) -> frozenset[Scope]:
    """``scopes`` as a set of known scopes, or ``ValueError`` naming the first unknown one."""
    known: set[Scope] = set()
    for scope in scopes:
        if scope not in ALL_SCOPES:
            raise ValueError(f"no scope {scope!r}: the scopes are {', '.join(ALL_SCOPES)}")
        known.add(scope)
    return frozenset(known)


@dataclass(frozen=True, slots=True)
class Identity:
    """A verified caller: ``subject`` (who, as the credential's issuer names them), ``tenant``
    (whose sessions they see; ``None``: every tenant's, an operator), the ``scopes`` they
    hold, the ``agents`` they may use (``None``: every agent), and a ``display`` name for
    people (the subject's, if not given).

    Example::

        support = Identity("support-1", tenant="acme", scopes=frozenset({"approvals:decide"}))
        assert support.allows("approvals:decide") and not support.allows("sessions:erase")
        assert support.sees("acme") and not support.sees("globex")
    """

    subject: str
    tenant: str | None = None
    scopes: frozenset[Scope] = field(default=frozenset(ALL_SCOPES))
    agents: frozenset[str] | None = None
    display: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.subject, str) or not self.subject:
            raise ValueError(f"an identity's subject is a non-empty string, not {self.subject!r}")
        if self.tenant is not None and (not isinstance(self.tenant, str) or not self.tenant):
            raise ValueError(f"a tenant is a non-empty string or None, not {self.tenant!r}")
        object.__setattr__(self, "scopes", check_scopes(self.scopes))
        if self.agents is not None:
            object.__setattr__(self, "agents", frozenset(self.agents))

    @property
    def name(self) -> str:
        """What people are shown: the display name, else the subject."""
        return self.display or self.subject

    def allows(self, scope: Scope) -> bool:
        """Whether the identity holds ``scope`` (``admin`` holds them all)."""
        return scope in self.scopes or "admin" in self.scopes

    def sees(self, tenant: str | None) -> bool:
        """Whether a resource of ``tenant`` is visible to this identity: an operator
        (``tenant=None``) sees every tenant's; a tenant's identity only its own."""
        return self.tenant is None or self.tenant == tenant

    def may_use(self, agent: str) -> bool:
        """Whether the identity may reach sessions of ``agent``."""
        return self.agents is None or agent in self.agents

    def actor(self) -> Actor:
        """The identity as the journal records it on what it puts in."""
        return Actor(subject=self.subject, tenant=self.tenant, display=self.display)
