"""PostgreSQL specifics of the webhook outbox: workers claiming at once, on two connections,
never take the same delivery (``FOR UPDATE SKIP LOCKED``), and together take every due one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from tether.store import SessionKey, WebhookDelivery
from tether.store.postgres import PostgresStore

from ..postgres import fresh_schema, store_url

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DELIVERIES = 60


@pytest.fixture
async def stores() -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores (two pools, so two connections) on one schema, as two workers have."""
    url = store_url(fresh_schema())
    first = await PostgresStore.open(url)
    second = await PostgresStore.open(url)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_two_workers_claiming_at_once_take_each_delivery_once(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = stores
    await first.put_webhook_deliveries(
        [
            WebhookDelivery(
                f"wh-{n:03}",
                "https://example.com/hook",
                "settled",
                SessionKey("a", "i", "s"),
                f"sub-{n}",
                T0,
                body=b"{}",
                next_attempt_at=T0 + timedelta(seconds=n % 7),
            )
            for n in range(DELIVERIES)
        ]
    )
    now, lease = T0 + timedelta(seconds=10), T0 + timedelta(seconds=60)
    taken: list[list[str]] = [[], []]

    async def worker(store: PostgresStore, mine: list[str]) -> None:
        while batch := await store.claim_webhook_deliveries(now, lease_until=lease, limit=4):
            mine.extend(row.id for row in batch)

    await asyncio.gather(worker(first, taken[0]), worker(second, taken[1]))
    everything = taken[0] + taken[1]
    assert len(everything) == len(set(everything)) == DELIVERIES
    rows = await first.list_webhook_deliveries(limit=DELIVERIES)
    assert all(row.attempts == 1 and row.next_attempt_at == lease for row in rows)
