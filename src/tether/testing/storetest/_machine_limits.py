"""The limits rules of the reference state machine: grants of slots, calls in a rate's
window and tokens per minute over a few keys, holders and owners; slots given back, renewed
and released for a dead owner; pauses; the live slots under a prefix; and batch claims that
hold agents back, all compared whole with the reference's.

A mixin of :class:`tether.testing.storetest._machine._ReferenceMachine`, which supplies the
stores, the event loop, its clock and ``_both`` (run one operation on both, require the same
outcome).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tether.store import HeldBack, LimitAsk, MemoryStore
from tether.testing.storetest._base import CompleteStore, Needed

__all__ = ("LimitRules",)

KEYS = ("agent:support", "agent:other", "model:p")
HOLDERS = ("h1", "h2", "h3", "h4")
OWNERS = ("w1", "w2")
HELD = (
    HeldBack(),
    HeldBack(agents=frozenset({"support"})),
    HeldBack(agents=frozenset({"other"}), tenants=frozenset({"t1"})),
)


class LimitRules:
    """Rules over the limits' holds; the machine supplies what is declared here."""

    loop: asyncio.AbstractEventLoop
    reference: MemoryStore
    attempts: list[str]
    fences: dict[str, int]

    def _both(
        self,
        operation: Callable[[CompleteStore], Awaitable[Any]],
        *,
        count: bool = True,
        needs: Needed | None = None,
    ) -> Any:
        raise NotImplementedError

    def _id(self, prefix: str) -> str:
        raise NotImplementedError

    def _now(self) -> datetime:
        raise NotImplementedError

    @rule(
        key=st.sampled_from(KEYS),
        holder=st.sampled_from(HOLDERS),
        owner=st.sampled_from(OWNERS),
        concurrency=st.sampled_from((None, 1, 2)),
        rate=st.sampled_from((None, (1, 5.0), (2, 30.0))),
        tokens=st.sampled_from((None, 100)),
        lease=st.integers(1, 60),
    )
    def acquire_limit(
        self,
        key: str,
        holder: str,
        owner: str,
        concurrency: int | None,
        rate: tuple[int, float] | None,
        tokens: int | None,
        lease: int,
    ) -> None:
        """A grant, or the same time to ask again."""
        now = self._now()
        ask = LimitAsk(
            key,
            holder,
            owner,
            now + timedelta(seconds=lease),
            concurrency=concurrency,
            rate=None if rate is None else rate[0],
            per_seconds=None if rate is None else rate[1],
            tokens_per_minute=tokens,
        )
        self._both(lambda s: s.acquire_limit(ask, now=now), needs="limits")

    @rule(key=st.sampled_from(KEYS), holder=st.sampled_from(HOLDERS))
    def release_limit(self, key: str, holder: str) -> None:
        self._both(lambda s: s.release_limit(key, holder=holder), needs="limits")

    @rule(owner=st.sampled_from(OWNERS), lease=st.integers(1, 60), dead=st.booleans())
    def renew_or_release_owner(self, owner: str, lease: int, dead: bool) -> None:
        """A live owner's heartbeat, or a dead owner's slots given back: as many either way."""
        if dead:
            self._both(lambda s: s.release_owner_limits(owner), needs="limits")
        else:
            until = self._now() + timedelta(seconds=lease)
            self._both(lambda s: s.renew_limits(owner, expires_at=until), needs="limits")

    @rule(key=st.sampled_from(KEYS), tokens=st.integers(0, 80), pause=st.integers(0, 20))
    def spend_or_pause(self, key: str, tokens: int, pause: int) -> None:
        now = self._now()
        if pause:
            until = now + timedelta(seconds=pause)
            self._both(lambda s: s.pause_limit(key, until=until), needs="limits")
        else:
            self._both(lambda s: s.spend_limit(key, tokens=tokens, now=now), needs="limits")

    @rule(prefix=st.sampled_from(("", "agent:", "model:", "tenant:")))
    def limit_slots(self, prefix: str) -> None:
        now = self._now()
        self._both(lambda s: s.limit_slots(prefix, now=now), needs="limits")

    @rule(held=st.sampled_from(HELD), count=st.integers(1, 3), lease=st.integers(1, 60))
    def claim_runnable_held_back(self, held: HeldBack, count: int, lease: int) -> None:
        """A batch claim passing over what is held back: the same heads on both."""
        attempts = [self._id("att") for _ in range(count)]
        self.attempts.extend(attempts)
        now = self._now()
        kind, result = self._both(
            lambda s: s.claim_runnable(
                attempt_ids=attempts,
                owner_id="o",
                lease_expires_at=now + timedelta(seconds=lease),
                now=now,
                held_back=held,
            ),
            needs="limits",
        )
        if kind == "ok":
            for head in result:
                self.fences[head.submission.conversation_id] = head.submission.fence
