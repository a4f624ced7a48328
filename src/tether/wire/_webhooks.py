"""What the webhook deliveries routes answer: one delivery of the outbound webhook outbox
(where it goes, what it tells of, how it went) and a page of them (docs/how-to/webhooks.md)."""

from __future__ import annotations

from pydantic import Field, JsonValue

from tether._states import WebhookStatus
from tether.wire._base import TIMESTAMP, WireResponse, optional

__all__ = ("WebhookDeliveriesPage", "WebhookDeliveryItem")


class WebhookDeliveryItem(WireResponse):
    """One delivery of the outbox: where it goes, what it tells of, and how it went."""

    id: str = Field(description="Stable: every attempt sends it as ``Tether-Delivery``.")
    url: str
    event: str = Field(description="settled, approval_requested or input_requested.")
    status: WebhookStatus = Field(
        description="held (a subscription, until its submission settles), pending, "
        "delivered, failed (every attempt failed: resend it), closed (a subscription "
        "not asked to tell of the settlement)."
    )
    agent: str
    instance: str
    session: str
    submission_id: str
    attempts: int
    created_at: str = Field(**TIMESTAMP)
    events: list[str] = Field(description="What the subscription asked for (a held row's).")
    next_attempt_at: str | None = optional(**TIMESTAMP)
    delivered_at: str | None = optional(**TIMESTAMP)
    last_status: int | None = optional(description="The last answer's HTTP status.")
    last_error: str | None = optional(description="Why the last attempt failed.")
    payload: JsonValue = optional(description="The JSON it sends (shown one at a time).")


class WebhookDeliveriesPage(WireResponse):
    """A page of the outbox's deliveries, oldest first."""

    deliveries: list[WebhookDeliveryItem]
    next_cursor: str | None = optional(description="Pass as ``after`` for the next page.")
