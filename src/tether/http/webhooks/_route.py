"""A webhook route: a verified delivery becomes a signal dispatch, once per delivery id."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import JsonValue

from tether._signing import secrets_of
from tether.engine import Inbound, Runtime, SignalInfo
from tether.http._errors import ApiError, failures
from tether.http._responses import respond, stream_url
from tether.http.webhooks._signature import GITHUB, HmacScheme
from tether.store import SessionKey
from tether.wire import WireResponse, optional

__all__ = (
    "Delivery",
    "Router",
    "WebhookReceipt",
    "WebhookTarget",
    "github_webhook",
    "webhook_router",
)

_DELIVERY_ID: Final = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_EVENT: Final = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True, slots=True)
class Delivery:
    """A delivery whose signature checked: its id and event (from the provider's headers),
    its JSON payload, the raw body and the request's headers (lower-case names)."""

    id: str
    event: str
    payload: JsonValue
    body: bytes
    headers: Mapping[str, str]

    @property
    def action(self) -> str | None:
        """The payload's ``action`` (GitHub's ``opened``, ``created``...), if it has one."""
        payload = self.payload
        action = payload.get("action") if isinstance(payload, dict) else None
        return action if isinstance(action, str) else None


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    """Where a delivery goes: a session of an agent. The signal's ``type`` is by default
    ``<source>.<event>[.<action>]``, its body the raw payload."""

    agent: str
    instance: str
    session: str = "default"
    signal_type: str | None = None


Router = Callable[[Delivery], "WebhookTarget | Awaitable[WebhookTarget | None] | None"]
"""Picks a delivery's session, or ``None`` to acknowledge it and admit nothing."""


class WebhookReceipt(WireResponse):
    """A verified delivery (202): the submission it was admitted as, or ``accepted: false``
    when the route's target took none of it. ``duplicate``: this delivery id was admitted
    before, with the same payload (a provider's retry); nothing new was admitted."""

    delivery: str
    event: str
    accepted: bool
    duplicate: bool = False
    submission_id: str | None = optional(description="The submission it was admitted as.")
    conversation_id: str | None = optional()
    session: str | None = optional()
    stream_url: str | None = optional(description="Where to follow the session.")


def webhook_router(
    runtime: Runtime,
    *,
    path: str,
    secret: str | bytes | Sequence[str | bytes],
    target: Router,
    scheme: HmacScheme = GITHUB,
    source: str = "github",
    delivery_header: str = "X-GitHub-Delivery",
    event_header: str = "X-GitHub-Event",
) -> APIRouter:
    """A ``POST path`` route for a provider's signed deliveries.

    In order: the signature over the raw body (401 ``invalid_signature`` if missing or
    wrong: nothing is read or stored), the delivery id and event headers (400), the JSON
    body (400), the ``target`` (``None``: 202, nothing admitted); then a ``signal`` dispatch
    whose dispatch id is ``<source>:<delivery id>``, so a redelivery gets the same 202 and a
    changed payload under the same id 409 ``dispatch_conflict``. Serve it with
    ``create_app(runtime, webhooks=[...])``, which leaves its path outside the bearer token
    (the signature is its auth).

    Example::

        hook = webhook_router(runtime, path="/webhooks/shop", secret=key, target=orders,
                              scheme=HmacScheme("X-Shop-Signature"), source="shop",
                              delivery_header="X-Shop-Delivery", event_header="X-Shop-Topic")
    """
    keys = secrets_of(secret)
    if not path.startswith("/"):
        raise ValueError(f"a webhook path starts with '/': {path!r}")
    router = APIRouter(tags=["webhooks"])

    @router.post(
        path,
        status_code=202,
        response_model=WebhookReceipt,
        responses=failures(400, 401, 403, 404, 408, 409, 413, 415, 422, 503),
        summary=f"A signed {source} delivery",
    )
    async def deliver(request: Request) -> Response:
        body = await request.body()
        headers = {name.lower(): value for name, value in request.headers.items()}
        if not scheme.verify(body, headers, keys):
            raise ApiError(
                401, "invalid_signature", f"the {scheme.header} signature is missing or wrong"
            )
        delivery = _delivery(body, headers, delivery_header, event_header)
        picked = target(delivery)
        chosen = await picked if inspect.isawaitable(picked) else picked
        if chosen is None:
            receipt = WebhookReceipt(delivery=delivery.id, event=delivery.event, accepted=False)
            return respond(receipt, 202)
        kind = chosen.signal_type or ".".join(
            part for part in (source, delivery.event, delivery.action) if part
        )
        sender = {"source": source, "delivery": delivery.id, "event": delivery.event}
        admitted = await runtime.dispatch(
            chosen.agent,
            chosen.instance,
            Inbound(kind="signal", body=body.decode(), signal=SignalInfo(type=kind, sender=sender)),
            session=chosen.session,
            dispatch_id=f"{source}:{delivery.id}",
        )
        key = SessionKey(chosen.agent, chosen.instance, admitted.session)
        receipt = WebhookReceipt(
            delivery=delivery.id,
            event=delivery.event,
            accepted=True,
            duplicate=not admitted.created,
            submission_id=admitted.submission_id,
            conversation_id=admitted.conversation_id,
            session=admitted.session,
            stream_url=stream_url(key),
        )
        return respond(receipt, 202, Location=f"/submissions/{admitted.submission_id}")

    return router


def _delivery(
    body: bytes, headers: Mapping[str, str], delivery_header: str, event_header: str
) -> Delivery:
    delivery_id = headers.get(delivery_header.lower(), "")
    if not _DELIVERY_ID.match(delivery_id):
        raise ApiError(400, "invalid_delivery", f"{delivery_header} must be 1-128 id characters")
    event = headers.get(event_header.lower(), "")
    if not _EVENT.match(event):
        raise ApiError(400, "invalid_delivery", f"{event_header} must be 1-100 name characters")
    try:
        payload = orjson.loads(body)
        body.decode()
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, "malformed_json", "the delivery's body is not JSON") from None
    return Delivery(delivery_id, event, payload, body, headers)


def github_webhook(
    runtime: Runtime,
    *,
    secret: str | bytes | Sequence[str | bytes],
    target: Router,
    path: str = "/webhooks/github",
) -> APIRouter:
    """GitHub's webhook: ``X-Hub-Signature-256``, idempotent by ``X-GitHub-Delivery``, the
    event from ``X-GitHub-Event``; the signal's type is ``github.<event>[.<action>]``.

    Example::

        def issues(delivery: Delivery) -> WebhookTarget | None:
            issue = delivery.payload.get("issue") if delivery.event == "issues" else None
            return None if issue is None else WebhookTarget(
                "triage", "acme", session=f"issue-{issue['number']}")

        app = create_app(runtime, webhooks=[github_webhook(runtime, secret=key, target=issues)])
    """
    return webhook_router(runtime, path=path, secret=secret, target=target)
