"""Conformance cases for the ``webhooks`` capability (``WebhookStore``): the outbound
webhook outbox: deliveries put once per id, held until released, claimed when due (one
attempt each, leased), finished only by the attempt that holds them, listed and resent."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from tether.store import SessionKey, WebhookDelivery, WebhookStatus
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("WebhookCases",)

KEY = SessionKey("support", "acme", "default")


def _delivery(
    delivery_id: str,
    at: datetime,
    *,
    status: WebhookStatus = WebhookStatus.PENDING,
    due: datetime | None = None,
    submission: str = "sub-1",
    tenant: str | None = None,
    event: str = "approval_requested",
) -> WebhookDelivery:
    held = status is WebhookStatus.HELD
    return WebhookDelivery(
        id=delivery_id,
        url="https://example.com/hooks",
        event="settled" if held else event,
        key=KEY,
        submission_id=submission,
        created_at=at,
        status=status,
        events=("settled", "input_requested") if held else (event,),
        body=None if held else b'{"id":"' + delivery_id.encode() + b'"}',
        next_attempt_at=None if held else (due or at),
        tenant=tenant,
    )


@needs("webhooks")
class WebhookCases(BaseConformance):
    """The webhook outbox."""

    @case
    async def test_put_keeps_the_first_of_an_id(self, store: CompleteStore, fx: Fixtures) -> None:
        first = _delivery("wh-1", fx.at(1), tenant="acme")
        await store.put_webhook_deliveries([first])
        await store.put_webhook_deliveries(
            [_delivery("wh-1", fx.at(5)), _delivery("wh-2", fx.at(2))]
        )
        assert await store.get_webhook_delivery("wh-1") == first
        assert await store.get_webhook_delivery("wh-absent") is None
        listed = await store.list_webhook_deliveries()
        assert [row.id for row in listed] == ["wh-1", "wh-2"]
        assert listed[0].events == ("approval_requested",) and listed[0].tenant == "acme"

    @case
    async def test_a_held_row_is_released_once(self, store: CompleteStore, fx: Fixtures) -> None:
        await store.put_webhook_deliveries(
            [
                _delivery("wh-held", fx.at(1), status=WebhookStatus.HELD),
                _delivery("wh-watch", fx.at(1), status=WebhookStatus.HELD),
            ]
        )
        assert await store.claim_webhook_deliveries(fx.at(9), lease_until=fx.at(20), limit=5) == []
        held = await store.get_webhook_delivery("wh-held")
        assert (
            held is not None and held.body is None and held.events == ("settled", "input_requested")
        )
        assert await store.release_webhook_delivery("wh-held", body=b"{}", now=fx.at(3))
        assert not await store.release_webhook_delivery("wh-held", body=b"[]", now=fx.at(4))
        assert await store.release_webhook_delivery("wh-watch", body=None, now=fx.at(3))
        assert not await store.release_webhook_delivery("wh-absent", body=b"{}", now=fx.at(3))
        released = await store.get_webhook_delivery("wh-held")
        assert released is not None
        assert (released.status, released.body, released.next_attempt_at) == (
            WebhookStatus.PENDING,
            b"{}",
            fx.at(3),
        )
        watch = await store.get_webhook_delivery("wh-watch")
        assert watch is not None and watch.status is WebhookStatus.CLOSED
        assert await store.resend_webhook_delivery("wh-watch", now=fx.at(5)) == watch

    @case
    async def test_claims_take_the_due_earliest_first_and_lease_them(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await store.put_webhook_deliveries(
            [
                _delivery("wh-late", fx.at(1), due=fx.at(30)),
                _delivery("wh-b", fx.at(1), due=fx.at(3)),
                _delivery("wh-a", fx.at(2), due=fx.at(2)),
                _delivery("wh-c", fx.at(1), due=fx.at(4)),
            ]
        )
        claimed = await store.claim_webhook_deliveries(fx.at(10), lease_until=fx.at(40), limit=2)
        assert [row.id for row in claimed] == ["wh-a", "wh-b"]
        assert all(row.attempts == 1 and row.next_attempt_at == fx.at(40) for row in claimed)
        more = await store.claim_webhook_deliveries(fx.at(10), lease_until=fx.at(40), limit=5)
        assert [row.id for row in more] == ["wh-c"]  # the others are leased, wh-late not due
        again = await store.claim_webhook_deliveries(fx.at(40), lease_until=fx.at(80), limit=5)
        assert [(row.id, row.attempts) for row in again] == [
            ("wh-late", 1),
            ("wh-a", 2),
            ("wh-b", 2),
            ("wh-c", 2),
        ]

    @case
    async def test_only_the_holding_attempt_finishes(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await store.put_webhook_deliveries([_delivery("wh-1", fx.at(1))])
        (first,) = await store.claim_webhook_deliveries(fx.at(1), lease_until=fx.at(11), limit=1)
        (second,) = await store.claim_webhook_deliveries(fx.at(11), lease_until=fx.at(21), limit=1)
        assert (first.attempts, second.attempts) == (1, 2)
        stale = await store.finish_webhook_attempt(
            "wh-1",
            attempt=1,
            status=WebhookStatus.DELIVERED,
            next_attempt_at=None,
            last_status=200,
            last_error=None,
            now=fx.at(12),
        )
        assert not stale
        assert await store.finish_webhook_attempt(
            "wh-1",
            attempt=2,
            status=WebhookStatus.PENDING,
            next_attempt_at=fx.at(30),
            last_status=500,
            last_error="answered HTTP 500",
            now=fx.at(12),
        )
        row = await store.get_webhook_delivery("wh-1")
        assert row is not None
        assert (row.status, row.attempts, row.next_attempt_at, row.last_status, row.last_error) == (
            WebhookStatus.PENDING,
            2,
            fx.at(30),
            500,
            "answered HTTP 500",
        )
        assert await store.claim_webhook_deliveries(fx.at(29), lease_until=fx.at(39), limit=1) == []
        await store.claim_webhook_deliveries(fx.at(30), lease_until=fx.at(40), limit=1)
        assert await store.finish_webhook_attempt(
            "wh-1",
            attempt=3,
            status=WebhookStatus.DELIVERED,
            next_attempt_at=fx.at(99),
            last_status=204,
            last_error=None,
            now=fx.at(31),
        )
        done = await store.get_webhook_delivery("wh-1")
        assert done is not None
        assert (done.status, done.delivered_at, done.next_attempt_at, done.last_status) == (
            WebhookStatus.DELIVERED,
            fx.at(31),
            None,
            204,
        )
        assert not await store.finish_webhook_attempt(
            "wh-1",
            attempt=3,
            status=WebhookStatus.FAILED,
            next_attempt_at=None,
            last_status=None,
            last_error="late",
            now=fx.at(32),
        )

    @case
    async def test_resend_makes_a_delivery_due_again(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await store.put_webhook_deliveries([_delivery("wh-1", fx.at(1))])
        await store.claim_webhook_deliveries(fx.at(1), lease_until=fx.at(11), limit=1)
        await store.finish_webhook_attempt(
            "wh-1",
            attempt=1,
            status=WebhookStatus.FAILED,
            next_attempt_at=None,
            last_status=None,
            last_error="refused",
            now=fx.at(2),
        )
        assert await store.claim_webhook_deliveries(fx.at(50), lease_until=fx.at(60), limit=1) == []
        again = await store.resend_webhook_delivery("wh-1", now=fx.at(50))
        assert again is not None
        assert (again.status, again.attempts, again.next_attempt_at, again.body) == (
            WebhookStatus.PENDING,
            0,
            fx.at(50),
            b'{"id":"wh-1"}',
        )
        assert await store.resend_webhook_delivery("wh-absent", now=fx.at(50)) is None
        (claimed,) = await store.claim_webhook_deliveries(fx.at(50), lease_until=fx.at(60), limit=1)
        assert claimed.attempts == 1 and claimed.last_error == "refused"

    @case
    async def test_listing_filters_and_pages(self, store: CompleteStore, fx: Fixtures) -> None:
        await store.put_webhook_deliveries(
            [
                _delivery("wh-3", fx.at(3), submission="sub-2", tenant="acme"),
                _delivery("wh-1", fx.at(1), tenant="acme"),
                _delivery("wh-2", fx.at(1), status=WebhookStatus.HELD, tenant="globex"),
                _delivery("wh-4", fx.at(4), submission="sub-2"),
            ]
        )

        async def ids(**filters: object) -> list[str]:
            rows = await store.list_webhook_deliveries(**filters)  # type: ignore[arg-type]
            return [row.id for row in rows]

        assert await ids() == ["wh-1", "wh-2", "wh-3", "wh-4"]
        assert await ids(limit=2) == ["wh-1", "wh-2"]
        assert await ids(after="wh-2") == ["wh-3", "wh-4"]
        assert await ids(after="wh-absent") == []
        assert await ids(tenant="acme") == ["wh-1", "wh-3"]
        assert await ids(status=WebhookStatus.HELD) == ["wh-2"]
        assert await ids(submission_id="sub-2") == ["wh-3", "wh-4"]
        assert await ids(submission_id="sub-2", after="wh-3") == ["wh-4"]
        assert await ids(tenant="nobody\x00") == []

    @case
    async def test_forget_deletes_a_sessions_deliveries(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        other = SessionKey("support", "acme", "other")
        await store.put_webhook_deliveries(
            [
                _delivery("wh-1", fx.at(1)),
                _delivery("wh-2", fx.at(2), status=WebhookStatus.HELD),
                dataclasses.replace(_delivery("wh-3", fx.at(3)), key=other),
            ]
        )
        assert await store.forget_webhook_deliveries(KEY) == 2
        assert [row.id for row in await store.list_webhook_deliveries()] == ["wh-3"]
        assert await store.forget_webhook_deliveries(KEY) == 0
        assert await store.get_webhook_delivery("wh-1") is None
