"""The outbound webhook outbox as a store keeps it: one row per delivery, its status, its
attempts and when it is next due (``WebhookStore``; docs/how-to/webhooks.md).

A submission's subscription (a dispatch's ``callback``, an application's per-agent
subscription) is a ``held`` row of event ``settled`` from its admission on: the watch the
engine derives the submission's deliveries from. It becomes ``pending`` (its body set) when the
submission settles, or ``closed`` if the subscription did not ask for ``settled``. A gate's
delivery (``approval_requested``, ``input_requested``) is ``pending`` from the start. Ids
are stable (derived from what caused the delivery), so putting one twice keeps the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from tether._states import WebhookStatus
from tether.store._types import SessionKey

__all__ = (
    "MAX_WEBHOOK_PAGE",
    "WEBHOOK_EVENTS",
    "WebhookDelivery",
    "WebhookStatus",
)

WEBHOOK_EVENTS: Final = ("settled", "approval_requested", "input_requested")
"""What a subscription may ask to hear of."""

MAX_WEBHOOK_PAGE: Final = 500
"""The most deliveries one listing returns."""


@dataclass(frozen=True, slots=True)
class WebhookDelivery:
    """One delivery of the outbox.

    ``id`` is stable (the receiver's idempotency key: every attempt sends it); ``event`` what
    it tells of; ``events`` what its subscription asked for (read from a ``held`` row);
    ``body`` the JSON sent (``None`` while held); ``attempts`` how many were made (a claim
    counts one); ``last_status`` the last answer's HTTP status, ``last_error`` why the last
    attempt failed.

    Example::

        row = await store.get_webhook_delivery("wh_4f1c...")
        print(row.status, row.attempts, row.last_status, row.last_error)
    """

    id: str
    url: str
    event: str
    key: SessionKey
    submission_id: str
    created_at: datetime
    status: WebhookStatus = WebhookStatus.PENDING
    events: tuple[str, ...] = ()
    body: bytes | None = None
    attempts: int = 0
    next_attempt_at: datetime | None = None
    last_status: int | None = None
    last_error: str | None = None
    delivered_at: datetime | None = None
    tenant: str | None = None
