"""Outbound webhook deliveries, visible and re-sendable: ``GET /webhook-deliveries`` lists
the outbox, ``GET /webhook-deliveries/{id}`` shows one (with the JSON it sends),
``POST /webhook-deliveries/{id}/resend`` sends one again (docs/how-to/webhooks.md). A
delivery is seen, and resent, by who may read (write) its submission."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Query

from tether.engine import Runtime, WebhookNotFound
from tether.errors import SubmissionNotFound
from tether.http._access import Access, AccessDependency, own_submission
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import ApiError, failures
from tether.http._responses import time_of
from tether.store import MAX_WEBHOOK_PAGE, WebhookDelivery, WebhookStatus
from tether.wire import WebhookDeliveriesPage, WebhookDeliveryItem

__all__ = ("webhook_deliveries_router", "webhook_delivery_item")


def webhook_delivery_item(row: WebhookDelivery, *, payload: bool = False) -> WebhookDeliveryItem:
    """The wire's view of a delivery; ``payload``: with the JSON it sends."""
    return WebhookDeliveryItem(
        id=row.id,
        url=row.url,
        event=row.event,
        status=row.status,
        agent=row.key.agent,
        instance=row.key.instance,
        session=row.key.session,
        submission_id=row.submission_id,
        attempts=row.attempts,
        created_at=row.created_at.isoformat(),
        events=list(row.events),
        next_attempt_at=time_of(row.next_attempt_at),
        delivered_at=time_of(row.delivered_at),
        last_status=row.last_status,
        last_error=row.last_error,
        payload=orjson.loads(row.body) if payload and row.body is not None else None,
    )


webhook_deliveries_router = APIRouter(tags=["webhooks"])
"""The outbound webhook outbox: listing, one delivery, a resend."""


async def _owned(runtime: Runtime, access: Access, delivery_id: str) -> WebhookDelivery:
    """The delivery, if the identity sees its submission (``WebhookNotFound`` otherwise)."""
    identity = access.identity
    delivery = await runtime.webhook_delivery(delivery_id, tenant=identity.tenant)
    if not identity.may_use(delivery.key.agent):
        raise WebhookNotFound(delivery_id)
    if access.authorize is not None:
        try:
            await own_submission(runtime, access, delivery.submission_id)
        except SubmissionNotFound:
            raise WebhookNotFound(delivery_id) from None
    return delivery


@webhook_deliveries_router.get("/webhook-deliveries", responses=failures(422, 501, 503))
async def deliveries(
    runtime: RuntimeDependency,
    access: AccessDependency,
    status: WebhookStatus | None = None,
    submission_id: str | None = Query(default=None, max_length=200, alias="submissionId"),
    limit: int = Query(default=50, ge=1, le=MAX_WEBHOOK_PAGE),
    after: str | None = Query(default=None, max_length=200),
) -> WebhookDeliveriesPage:
    """The outbox's deliveries, oldest first: a tenant's identity sees its own only.
    ``after``: the ``nextCursor`` of the page before."""
    identity = access.identity
    rows = await runtime.webhook_deliveries(
        status=status,
        submission_id=submission_id,
        tenant=identity.tenant,
        limit=limit,
        after=after,
    )
    shown = [row for row in rows if identity.may_use(row.key.agent)]
    return WebhookDeliveriesPage(
        deliveries=[webhook_delivery_item(row) for row in shown],
        next_cursor=rows[-1].id if len(rows) == limit else None,
    )


@webhook_deliveries_router.get(
    "/webhook-deliveries/{delivery_id}", responses=failures(403, 404, 422, 501, 503)
)
async def delivery(
    runtime: RuntimeDependency, access: AccessDependency, delivery_id: str
) -> WebhookDeliveryItem:
    """One delivery, with the JSON it sends."""
    return webhook_delivery_item(await _owned(runtime, access, delivery_id), payload=True)


@webhook_deliveries_router.post(
    "/webhook-deliveries/{delivery_id}/resend", responses=failures(403, 404, 409, 422, 501, 503)
)
async def resend(
    runtime: RuntimeDependency, access: AccessDependency, delivery_id: str
) -> WebhookDeliveryItem:
    """Send a delivery again now, with the same id and body (its attempts counted from 0):
    a failed one, or one a receiver lost. A subscription (``held``, ``closed``) is 409."""
    found = await _owned(runtime, access, delivery_id)
    if found.status in (WebhookStatus.HELD, WebhookStatus.CLOSED):
        raise ApiError(
            409,
            "webhook_not_sendable",
            f"{delivery_id} is a subscription ({found.status.value}), not a delivery",
        )
    again = await runtime.resend_webhook(delivery_id, tenant=access.identity.tenant)
    return webhook_delivery_item(again, payload=True)
