"""The version rules of the reference state machine: claims by a worker that serves some
agent versions (by id and in batches: which heads are taken, and what each is stamped),
versions moved by CAS, the counts by version and the workers, compared whole.

A mixin of :class:`tether.testing.storetest._machine._ReferenceMachine`, which supplies the
stores, the event loop and ``_both`` (run one operation on both, require the same outcome).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from tether.store import MemoryStore, VersionsServed
from tether.testing.storetest._base import CompleteStore, Needed

__all__ = ("VersionRules",)

SERVES: tuple[VersionsServed, ...] = (
    {"support": ["v1"]},
    {"support": ["v2", "v1"]},
    {"support": ["v2", "*"]},
    {"support": ["v3"], "other": ["v1"]},
    {"other": ["v1"]},
    {},
)
VERSIONS = ("v1", "v2", "v3")


class VersionRules:
    """Rules over the machine's submissions; the machine supplies what is declared here."""

    loop: asyncio.AbstractEventLoop
    reference: MemoryStore
    submissions: list[str]
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

    @precondition(lambda self: self.submissions)
    @rule(data=st.data(), serves=st.sampled_from(SERVES), lease=st.integers(1, 60))
    def claim_served(self, data: st.DataObject, serves: VersionsServed, lease: int) -> None:
        """A versioned claim of any submission: taken and stamped, or ``ClaimLost`` alike."""
        runnable = self.loop.run_until_complete(self.reference.list_runnable(1000))
        sid = data.draw(st.sampled_from([*(s.id for s in runnable), *self.submissions]))
        attempt, now = self._id("att"), self._now()
        self.attempts.append(attempt)
        kind, result = self._both(
            lambda s: s.claim(
                sid,
                attempt_id=attempt,
                owner_id="o",
                lease_expires_at=now + timedelta(seconds=lease),
                now=now,
                serves=serves,
            )
        )
        if kind == "ok":
            self.fences[result.conversation_id] = result.fence

    @rule(
        serves=st.sampled_from((None, *SERVES)), count=st.integers(1, 3), lease=st.integers(1, 60)
    )
    def claim_runnable_served(self, serves: VersionsServed | None, count: int, lease: int) -> None:
        """A batch claim, versioned or not: the same heads, oldest first, stamped alike."""
        attempts = [self._id("att") for _ in range(count)]
        self.attempts.extend(attempts)
        now = self._now()
        kind, result = self._both(
            lambda s: s.claim_runnable(
                attempt_ids=attempts,
                owner_id="o",
                lease_expires_at=now + timedelta(seconds=lease),
                now=now,
                serves=serves,
            )
        )
        if kind == "ok":
            for head in result:
                self.fences[head.submission.conversation_id] = head.submission.fence

    @precondition(lambda self: self.submissions)
    @rule(
        data=st.data(),
        expected=st.sampled_from((None, None, *VERSIONS)),
        version=st.sampled_from(VERSIONS),
    )
    def set_version(self, data: st.DataObject, expected: str | None, version: str) -> None:
        sid = data.draw(st.sampled_from([*self.submissions, "sub-absent"]))
        self._both(
            lambda s: s.set_version(sid, expected=expected, version=version), needs="versions"
        )

    @rule(agent=st.sampled_from((None, "support", "other")))
    def version_counts(self, agent: str | None) -> None:
        self._both(lambda s: s.version_counts(agent), needs="versions")

    @rule(
        owner=st.sampled_from(("w1", "w2")),
        serves=st.sampled_from(SERVES),
        action=st.sampled_from(("put", "put", "forget")),
    )
    def workers(self, owner: str, serves: VersionsServed, action: str) -> None:
        now = self._now()
        if action == "put":
            self._both(lambda s: s.put_worker(owner, serves, now=now), needs="versions")
        else:
            self._both(lambda s: s.forget_worker(owner), needs="versions")
        self._both(lambda s: s.list_workers(), needs="versions")
