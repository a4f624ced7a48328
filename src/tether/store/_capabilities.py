"""What a store offers beyond the log, decided once: the engine and the journal branch on
these fields instead of asking ``isinstance`` of a protocol on every call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from tether._conformance import implements
from tether.store._protocol import ChangeFeed, LogStore, OwnerLiveness, Store

__all__ = ("StoreCapabilities",)


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """The optional parts of the store contract one store implements.

    ``whole`` is the store itself when it keeps submissions beside the log (a :class:`Store`):
    an append can then settle a claim or wake a parked submission in the same commit.
    ``change_feed`` wakes this process for work done in others; ``liveness`` tells a dead
    worker from a slow one. Each is ``None`` when the store lacks it.

    Example::

        capabilities = StoreCapabilities.of(store)
        if capabilities.change_feed is not None:
            with capabilities.change_feed.listen("work") as woken:
                ...
    """

    whole: Store | None
    change_feed: ChangeFeed | None
    liveness: OwnerLiveness | None

    @classmethod
    def of(cls, store: LogStore) -> StoreCapabilities:
        return cls(
            whole=cast(Store, store) if implements(store, Store) else None,
            change_feed=cast(ChangeFeed, store) if implements(store, ChangeFeed) else None,
            liveness=cast(OwnerLiveness, store) if implements(store, OwnerLiveness) else None,
        )
