"""The webhook outbox rules of the reference state machine: deliveries put (a held
subscription or a due delivery, an id put again), released, claimed, finished by the attempt
that holds them or a stale one, resent, listed and forgotten, each compared whole.

A mixin of :class:`tether.testing.storetest._machine._ReferenceMachine`, which supplies the
stores, the event loop and ``_both`` (run one operation on both, require the same outcome).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tether.store import MemoryStore, SessionKey, WebhookDelivery, WebhookStatus
from tether.testing.storetest._base import CompleteStore, Needed

__all__ = ("WebhookRules",)

IDS = tuple(f"wh-{n}" for n in range(6))
KEYS = (SessionKey("support", "acme", "default"), SessionKey("support", "acme", "other"))
FINISHED = (WebhookStatus.PENDING, WebhookStatus.DELIVERED, WebhookStatus.FAILED)


class WebhookRules:
    """Rules over a small pool of delivery ids; the machine supplies what is declared here."""

    loop: asyncio.AbstractEventLoop
    reference: MemoryStore

    def _both(
        self,
        operation: Callable[[CompleteStore], Awaitable[Any]],
        *,
        count: bool = True,
        needs: Needed | None = None,
    ) -> Any:
        raise NotImplementedError

    def _now(self) -> datetime:
        raise NotImplementedError

    @rule(
        delivery_id=st.sampled_from(IDS),
        held=st.booleans(),
        due=st.integers(-30, 30),
        key=st.sampled_from(KEYS),
        tenant=st.sampled_from((None, "acme")),
    )
    def put_webhook(
        self, delivery_id: str, held: bool, due: int, key: SessionKey, tenant: str | None
    ) -> None:
        now = self._now()
        delivery = WebhookDelivery(
            delivery_id,
            "https://example.com/hook",
            "settled" if held else "input_requested",
            key,
            f"sub-{delivery_id}",
            now,
            status=WebhookStatus.HELD if held else WebhookStatus.PENDING,
            events=("settled",),
            body=None if held else delivery_id.encode(),
            next_attempt_at=None if held else now + timedelta(seconds=due),
            tenant=tenant,
        )
        self._both(lambda s: s.put_webhook_deliveries([delivery]), needs="webhooks")

    @rule(delivery_id=st.sampled_from(IDS), body=st.sampled_from((None, b"{}")))
    def release_webhook(self, delivery_id: str, body: bytes | None) -> None:
        now = self._now()
        self._both(
            lambda s: s.release_webhook_delivery(delivery_id, body=body, now=now), needs="webhooks"
        )

    @rule(limit=st.integers(1, 4), lease=st.integers(0, 60))
    def claim_webhooks(self, limit: int, lease: int) -> None:
        now = self._now()
        self._both(
            lambda s: s.claim_webhook_deliveries(
                now, lease_until=now + timedelta(seconds=lease), limit=limit
            ),
            needs="webhooks",
        )

    @rule(
        delivery_id=st.sampled_from(IDS),
        attempt=st.integers(0, 4),
        status=st.sampled_from(FINISHED),
        later=st.integers(0, 30),
    )
    def finish_webhook(
        self, delivery_id: str, attempt: int, status: WebhookStatus, later: int
    ) -> None:
        now = self._now()
        self._both(
            lambda s: s.finish_webhook_attempt(
                delivery_id,
                attempt=attempt,
                status=status,
                next_attempt_at=now + timedelta(seconds=later),
                last_status=500,
                last_error="answered HTTP 500",
                now=now,
            ),
            needs="webhooks",
        )

    @rule(delivery_id=st.sampled_from(IDS))
    def resend_webhook(self, delivery_id: str) -> None:
        now = self._now()
        self._both(lambda s: s.resend_webhook_delivery(delivery_id, now=now), needs="webhooks")

    @rule(
        status=st.sampled_from((None, *WebhookStatus)),
        tenant=st.sampled_from((None, "acme")),
        limit=st.integers(1, 4),
        after=st.sampled_from((None, *IDS)),
    )
    def list_webhooks(
        self, status: WebhookStatus | None, tenant: str | None, limit: int, after: str | None
    ) -> None:
        self._both(
            lambda s: s.list_webhook_deliveries(
                status=status, tenant=tenant, limit=limit, after=after
            ),
            needs="webhooks",
        )

    @rule(key=st.sampled_from(KEYS))
    def forget_webhooks(self, key: SessionKey) -> None:
        self._both(lambda s: s.forget_webhook_deliveries(key), needs="webhooks")
