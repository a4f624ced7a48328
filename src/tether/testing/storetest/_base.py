"""The conformance harness: a base class whose test methods run on any backend."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, cast

import pytest

from tether.records import Actor, RecordDraft, UserMessage, format_time
from tether.store import (
    CAPABILITIES,
    DEFAULT_PRIORITY_AGING,
    AdmitAndClaimStore,
    AttachmentStore,
    CapabilityName,
    ChildStore,
    ForkStore,
    GateStore,
    ImportStore,
    LimitStore,
    MemoryItemStore,
    NewSubmission,
    RetentionStore,
    ScheduleStore,
    SessionKey,
    SessionListStore,
    SnapshotStore,
    Store,
    StoreCapabilities,
    Submission,
    TaskParent,
    TimerStore,
    TokenStore,
    UsageStore,
    VersionsServed,
    VersionStore,
    WebhookStore,
)

__all__ = (
    "BaseConformance",
    "CompleteStore",
    "Fixtures",
    "Needed",
    "case",
    "complete",
    "needs",
    "offers",
)

SelfT = TypeVar("SelfT", bound="BaseConformance")
MarkedT = TypeVar("MarkedT", bound=Callable[..., Any] | type)

Needed = CapabilityName | Literal["waits"]
"""What a case may need beyond the core: a capability, or ``waits`` (parking, which a store
offers with gates or children)."""


class CompleteStore(
    LimitStore,
    Store,
    AdmitAndClaimStore,
    AttachmentStore,
    SnapshotStore,
    ForkStore,
    GateStore,
    ChildStore,
    SessionListStore,
    RetentionStore,
    ImportStore,
    ScheduleStore,
    VersionStore,
    TokenStore,
    TimerStore,
    UsageStore,
    MemoryItemStore,
    WebhookStore,
    Protocol,
):
    """A store that offers every capability but the two across processes (``change_feed``
    and ``liveness``), as the shipped stores do: how the cases see a store (each runs only
    on a store that offers what it is marked to need, :func:`needs`, so that is all it
    calls), and how a test of a feature types the store it runs on (:func:`complete`)."""


T0 = datetime(2026, 1, 1, tzinfo=UTC)
AGENT, INSTANCE = "support", "acme"


class BaseConformance:
    """What a backend supplies. Subclass :class:`tether.testing.storetest.StoreConformance`."""

    async def make_store(self, directory: Path) -> Store:
        """Open a fresh, empty store; ``directory`` is an empty directory it may use."""
        raise NotImplementedError

    async def tamper(self, store: Store, conversation_id: str, seq: int, body: bytes) -> None:
        """Overwrite the stored bytes of one record behind the store's back (keep its hashes)."""
        raise NotImplementedError

    async def truncate(self, store: Store, conversation_id: str, seq: int) -> None:
        """Delete the records after ``seq`` behind the store's back (and nothing else)."""
        raise NotImplementedError


def complete(store: Store) -> CompleteStore:
    """``store``, seen as offering every capability :class:`CompleteStore` covers (as every
    shipped store does); ``TypeError`` naming what it lacks otherwise.

    Example::

        store = complete(await open_store(url))
        children = await store.list_children(submission_id)
    """
    lacking = [n for n in StoreCapabilities.of(store).missing if n not in _CROSS_PROCESS]
    if lacking:
        raise TypeError(f"{type(store).__name__} does not offer {', '.join(lacking)}")
    return cast(CompleteStore, store)


_CROSS_PROCESS = ("change_feed", "liveness")
"""What :class:`CompleteStore` leaves out: wake-ups and liveness across processes."""


def offers(store: Store, needed: Needed) -> bool:
    """Whether ``store`` offers what a case needs."""
    capabilities = StoreCapabilities.of(store)
    if needed == "waits":
        return capabilities.waits is not None
    return needed not in capabilities.missing


def needs(*needed: Needed) -> Callable[[MarkedT], MarkedT]:
    """Mark a case, or every case of a class of cases, as needing these capabilities: it is
    skipped on a store that does not offer them (a backend passes the core cases and those
    of each capability it offers)."""
    unknown = set(needed) - {*CAPABILITIES, "waits"}
    if unknown:
        raise ValueError(f"no such capabilities: {sorted(unknown)}")

    def mark(target: MarkedT) -> MarkedT:
        cases = (
            [v for k, v in vars(target).items() if k.startswith("test_")]
            if isinstance(target, type)
            else [target]
        )
        for test in cases:
            setattr(test, "needs", (*getattr(test, "needs", ()), *needed))  # noqa: B010
        return target

    return mark


def case(
    fn: Callable[[SelfT, CompleteStore, Fixtures], Awaitable[None]],
) -> Callable[[SelfT, Path], None]:
    """Turn ``async def case(self, store, fx)`` into a plain pytest test with a fresh store,
    skipped when the store does not offer what the case :func:`needs`.

    Plain functions keep the suite independent of whichever async pytest plugin (if any)
    the backend's project uses.
    """

    def test(self: SelfT, tmp_path: Path) -> None:
        async def run() -> list[Needed]:
            store = await self.make_store(tmp_path)
            try:
                missing = [n for n in getattr(test, "needs", ()) if not offers(store, n)]
                if not missing:
                    complete = cast(CompleteStore, store)
                    await fn(self, complete, Fixtures(complete))
                return missing
            finally:
                await store.close()

        missing = asyncio.run(run())
        if missing:
            pytest.skip(f"the store does not offer {', '.join(missing)}")

    # Not functools.wraps: pytest must see (self, tmp_path), not the coroutine's signature.
    test.__name__ = test.__qualname__ = fn.__name__
    test.__doc__ = fn.__doc__
    return test


class Fixtures:
    """Deterministic ids, times and shortcuts used by the cases."""

    def __init__(self, store: CompleteStore) -> None:
        self.store = store
        self._ids = itertools.count(1)

    def id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids):010d}"

    @staticmethod
    def key(session: str = "default", instance: str = INSTANCE, agent: str = AGENT) -> SessionKey:
        return SessionKey(agent, instance, session)

    @staticmethod
    def at(seconds: float) -> datetime:
        return T0 + timedelta(seconds=seconds)

    def new(
        self,
        session: str = "default",
        *,
        dispatch_id: str | None = None,
        body: str = "hello",
        instance: str = INSTANCE,
        trace: dict[str, str] | None = None,
        parent: TaskParent | None = None,
        agent: str = AGENT,
        tenant: str | None = None,
        by: Actor | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
        seconds: float = 0,
        aging: timedelta = DEFAULT_PRIORITY_AGING,
    ) -> NewSubmission:
        return NewSubmission(
            id=self.id("sub"),
            key=self.key(session, instance, agent),
            conversation_id=self.id("conv"),
            input={"kind": "user", "body": body},
            created_at=self.at(seconds),
            dispatch_id=dispatch_id,
            trace=trace,
            parent=parent,
            tenant=tenant,
            by=by,
            run_at=run_at,
            priority=priority,
            priority_aging=aging,
        )

    async def admit(self, session: str = "default", **kwargs: Any) -> Submission:
        return (await self.store.admit(self.new(session, **kwargs))).submission

    async def claim(
        self,
        submission: Submission,
        *,
        lease_seconds: float = 60,
        serves: VersionsServed | None = None,
    ) -> Submission:
        return await self.store.claim(
            submission.id,
            attempt_id=self.id("att"),
            owner_id="owner-1",
            lease_expires_at=self.at(lease_seconds),
            now=self.at(0),
            serves=serves,
        )

    def draft(self, text: str = "hi", **kwargs: Any) -> RecordDraft:
        return RecordDraft(
            UserMessage(body=text), id=self.id("rec"), time=format_time(T0), **kwargs
        )

    async def conversation(self, session: str = "default") -> str:
        conversation, _ = await self.store.ensure_conversation(
            self.key(session), conversation_id=self.id("conv"), created_at=T0
        )
        return conversation.id

    async def fill(self, conversation_id: str, count: int, *, fence: int = 0) -> None:
        for _ in range(count):
            head = await self.store.head(conversation_id)
            await self.store.append(conversation_id, [self.draft()], expected_seq=head, fence=fence)
