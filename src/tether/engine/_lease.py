"""A claim's lease as this process knows it: when it runs out, renewed on the heartbeat, and
confirmed before an effect whenever a heartbeat's worth of it is no longer left.

A claim is taken over only once its lease ran out. While more than a heartbeat of it is
left, nobody can have taken it over, and the run's heartbeat renews it in time: an effect
may start at once, at the cost of reading the clock. With less left, the heartbeats were
missed (the process was frozen, or its event loop blocked), and another worker may own the
claim already: the lease is renewed first, and a claim lost meanwhile makes no effect. The
fence refuses every write of a run that lost its claim; this spares the model call (or the
tool run) such a run would otherwise make before its first write is refused.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from tether.engine._context import EngineContext
from tether.engine._runs import Stop
from tether.errors import ClaimLost, TetherError
from tether.journal import ToolExecutor, ToolScope
from tether.messages import ModelRequest, ModelResponse, ToolCall, ToolResult
from tether.models import DeltaSink, Model
from tether.store import Submission

__all__ = ("Lease", "LeaseGuardedModel", "LeaseGuardedTools")

logger = logging.getLogger("tether.engine")


class Lease:
    """The lease of this process's claim of ``submission``, as last claimed or renewed."""

    def __init__(self, context: EngineContext, submission: Submission) -> None:
        self._context = context
        self._submission_id = submission.id
        self._attempt_id = str(submission.attempt_id)
        self.expires_at: datetime | None = submission.lease_expires_at

    def fresh(self) -> bool:
        """Whether more than a heartbeat of the lease is left (so nobody took it over)."""
        context = self._context
        beat = timedelta(seconds=context.config.heartbeat_interval)
        return self.expires_at is not None and context.clock.now() + beat < self.expires_at

    async def renew(self) -> Submission:
        """Extend the lease by the configured length from now. ``ClaimLost`` if it is no
        longer this process's; a store error as it came."""
        context = self._context
        expires = context.clock.now() + timedelta(seconds=context.config.lease)
        renewed = await context.store.renew_lease(
            self._submission_id, attempt_id=self._attempt_id, lease_expires_at=expires
        )
        self.expires_at = renewed.lease_expires_at or expires
        return renewed

    async def confirm(self) -> bool:
        """Whether the claim is still this process's, renewed first if a heartbeat of its
        lease is no longer left. A store error counts as still ours: the heartbeat finds
        out, as it would for any run."""
        if self.fresh():
            return True
        try:
            await self.renew()
        except ClaimLost:
            logger.info("the claim of %s was lost before an effect", self._submission_id)
            return False
        except TetherError:
            pass
        return True


async def _confirmed(lease: Lease, stop: Stop) -> None:
    """Return if the claim is still ours; else stop the run as its heartbeat would have."""
    if not await lease.confirm():
        stop.reason = stop.reason or "lease_lost"
        raise asyncio.CancelledError  # the run ends as cancelled, as the heartbeat ends it


class LeaseGuardedModel:
    """A model client whose every call first confirms the claim (see the module)."""

    def __init__(self, inner: Model, lease: Lease, stop: Stop) -> None:
        self._inner, self._lease, self._stop = inner, lease, stop

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        await _confirmed(self._lease, self._stop)
        return await self._inner.request(request, stream)


class LeaseGuardedTools:
    """A tool executor whose every run first confirms the claim (see the module)."""

    def __init__(self, inner: ToolExecutor, lease: Lease, stop: Stop) -> None:
        self._inner, self._lease, self._stop = inner, lease, stop

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        await _confirmed(self._lease, self._stop)
        return await self._inner.execute(call, scope)
