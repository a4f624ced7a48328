"""What a store offers beyond the core, found out once: the runtime detects it when it opens
the store and carries it in its context, so the engine and its journals branch on these
fields instead of asking ``isinstance`` of a protocol on every call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

from tether._conformance import implements
from tether.errors import StoreCapabilityMissing
from tether.store._protocol import (
    AdmitAndClaimStore,
    AttachmentStore,
    ChangeFeed,
    ChildStore,
    ForkStore,
    GateStore,
    ImportStore,
    LimitStore,
    LogStore,
    MemoryItemStore,
    OwnerLiveness,
    RetentionStore,
    ScheduleStore,
    SessionListStore,
    SnapshotStore,
    Store,
    TimerStore,
    TokenStore,
    UsageStore,
    VersionStore,
    WaitStore,
    WebhookStore,
)

__all__ = ("CAPABILITIES", "CapabilityName", "StoreCapabilities", "require_capability")

CapabilityName = Literal[
    "admit_and_claim",
    "attachments",
    "snapshots",
    "forks",
    "gates",
    "children",
    "sessions",
    "retention",
    "import",
    "schedules",
    "change_feed",
    "liveness",
    "versions",
    "tokens",
    "timers",
    "limits",
    "usage",
    "memory",
    "webhooks",
]

CAPABILITIES: Mapping[CapabilityName, type] = {
    "admit_and_claim": AdmitAndClaimStore,
    "attachments": AttachmentStore,
    "snapshots": SnapshotStore,
    "forks": ForkStore,
    "gates": GateStore,
    "children": ChildStore,
    "sessions": SessionListStore,
    "retention": RetentionStore,
    "import": ImportStore,
    "schedules": ScheduleStore,
    "change_feed": ChangeFeed,
    "liveness": OwnerLiveness,
    "versions": VersionStore,
    "tokens": TokenStore,
    "timers": TimerStore,
    "limits": LimitStore,
    "usage": UsageStore,
    "memory": MemoryItemStore,
    "webhooks": WebhookStore,
}
"""Every capability by its name (the one :class:`~tether.errors.StoreCapabilityMissing`
carries) and the protocol a store implements to offer it, in the order the docs list them."""

T = TypeVar("T")


def require_capability(offered: T | None, name: CapabilityName) -> T:
    """``offered``, a field of :class:`StoreCapabilities`, or ``StoreCapabilityMissing``
    naming the capability when the store does not offer it.

    Example::

        gates = require_capability(capabilities.gates, "gates")
        page = await gates.list_gates(status=GateStatus.PENDING)
    """
    if offered is None:
        raise StoreCapabilityMissing(name, CAPABILITIES[name].__name__)
    return offered


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """The capabilities one store offers, each the store itself (typed as its protocol) or
    ``None`` when it lacks it. ``whole`` is the store when it is a whole :class:`Store` (the
    core), not only a :class:`LogStore`: an append can then settle a claim in its commit.
    ``waits`` is there when the store parks submissions (it offers gates or children).

    Example::

        capabilities = StoreCapabilities.of(store)
        if capabilities.change_feed is not None:
            with capabilities.change_feed.listen("work") as woken:
                ...
        print(capabilities.missing)  # ('schedules',) for a store without schedules
    """

    whole: Store | None
    admit_and_claim: AdmitAndClaimStore | None
    attachments: AttachmentStore | None
    snapshots: SnapshotStore | None
    forks: ForkStore | None
    waits: WaitStore | None
    gates: GateStore | None
    children: ChildStore | None
    sessions: SessionListStore | None
    retention: RetentionStore | None
    imports: ImportStore | None
    schedules: ScheduleStore | None
    change_feed: ChangeFeed | None
    liveness: OwnerLiveness | None
    versions: VersionStore | None
    tokens: TokenStore | None
    timers: TimerStore | None
    limits: LimitStore | None
    usage: UsageStore | None
    memory: MemoryItemStore | None
    webhooks: WebhookStore | None

    @classmethod
    def of(cls, store: LogStore) -> StoreCapabilities:
        """What ``store`` offers, by the protocols its class implements (asked once per
        class: see :func:`tether._conformance.implements`)."""

        def offered(protocol: type) -> object:
            return store if implements(store, protocol) else None

        return cls(
            whole=cast(Store | None, offered(Store)),
            admit_and_claim=cast(AdmitAndClaimStore | None, offered(AdmitAndClaimStore)),
            attachments=cast(AttachmentStore | None, offered(AttachmentStore)),
            snapshots=cast(SnapshotStore | None, offered(SnapshotStore)),
            forks=cast(ForkStore | None, offered(ForkStore)),
            waits=cast(WaitStore | None, offered(WaitStore)),
            gates=cast(GateStore | None, offered(GateStore)),
            children=cast(ChildStore | None, offered(ChildStore)),
            sessions=cast(SessionListStore | None, offered(SessionListStore)),
            retention=cast(RetentionStore | None, offered(RetentionStore)),
            imports=cast(ImportStore | None, offered(ImportStore)),
            schedules=cast(ScheduleStore | None, offered(ScheduleStore)),
            change_feed=cast(ChangeFeed | None, offered(ChangeFeed)),
            liveness=cast(OwnerLiveness | None, offered(OwnerLiveness)),
            versions=cast(VersionStore | None, offered(VersionStore)),
            tokens=cast(TokenStore | None, offered(TokenStore)),
            timers=cast(TimerStore | None, offered(TimerStore)),
            limits=cast(LimitStore | None, offered(LimitStore)),
            usage=cast(UsageStore | None, offered(UsageStore)),
            memory=cast(MemoryItemStore | None, offered(MemoryItemStore)),
            webhooks=cast(WebhookStore | None, offered(WebhookStore)),
        )

    @property
    def missing(self) -> tuple[CapabilityName, ...]:
        """The names of the capabilities the store does not offer, in :data:`CAPABILITIES`
        order."""
        return tuple(name for name in CAPABILITIES if getattr(self, _field(name)) is None)


def _field(name: CapabilityName) -> str:
    return "imports" if name == "import" else name
