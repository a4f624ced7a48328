"""Outbound webhooks over HTTP: a dispatch's ``callback`` is delivered to a loopback
receiver; ``/webhook-deliveries`` lists, shows and resends; a refused or malformed callback
is a 422 with the error envelope and admits nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tether import verify_signature
from tether.engine import ManualClock, WebhookSettings

from ..engine.agents import echo_agent
from ..fakes.webhook_receiver import webhook_receiver
from .conftest import Server

Serve = Callable[..., Any]
SECRET = "whsec-http"
SETTINGS = {"webhook_settings": WebhookSettings(secret=SECRET, allow=["127.0.0.0/8"])}


async def test_a_callback_is_delivered_listed_shown_and_resent(
    asgi: Serve, clock: ManualClock
) -> None:
    server: Server = await asgi({"echo": echo_agent()}, settings=SETTINGS)
    c = server.client
    async with webhook_receiver() as receiver:
        sent = await c.post(
            "/agents/echo/acme",
            json={"body": "hi", "callback": {"url": receiver.url, "events": ["settled"]}},
        )
        assert sent.status_code == 202, sent.text
        got = await receiver.next()
        assert verify_signature(
            got.body, got.headers["tether-signature"], SECRET, now=clock.now().timestamp()
        )
        delivery_id = got.headers["tether-delivery"]

        listed = await c.get(
            "/webhook-deliveries", params={"submissionId": sent.json()["submissionId"]}
        )
        assert listed.status_code == 200, listed.text
        [row] = listed.json()["deliveries"]
        assert row["id"] == delivery_id and row["event"] == "settled" and row["url"] == receiver.url
        assert "payload" not in row

        shown = await c.get(f"/webhook-deliveries/{delivery_id}")
        assert shown.status_code == 200, shown.text
        assert shown.json()["payload"]["submissionId"] == sent.json()["submissionId"]
        assert shown.json()["payload"]["data"]["settlement"]["result"] == "echo: hi"

        resent = await c.post(f"/webhook-deliveries/{delivery_id}/resend", json={})
        assert resent.status_code == 200, resent.text
        assert resent.json()["attempts"] == 0 and resent.json()["status"] in (
            "pending",
            "delivered",
        )
        again = await receiver.next()
        assert again.headers["tether-delivery"] == delivery_id and again.body == got.body


async def test_unknown_and_unsendable_deliveries(asgi: Serve) -> None:
    server: Server = await asgi({"echo": echo_agent()}, settings=SETTINGS)
    c = server.client
    missing = await c.get("/webhook-deliveries/wh_nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "webhook_not_found"
    assert (await c.post("/webhook-deliveries/wh_nope/resend", json={})).status_code == 404
    # A dispatch that never settles here: its subscription is held (runAt in an hour).
    held = await c.post(
        "/agents/echo/acme",
        json={"body": "later", "afterSeconds": 3600,
              "callback": {"url": "http://127.0.0.1:9/hook"}},
    )  # fmt: skip
    assert held.status_code == 202, held.text
    [row] = (await c.get("/webhook-deliveries", params={"status": "held"})).json()["deliveries"]
    refused = await c.post(f"/webhook-deliveries/{row['id']}/resend", json={})
    assert refused.status_code == 409
    assert refused.json()["error"]["type"] == "webhook_not_sendable"
    page = await c.get("/webhook-deliveries", params={"limit": 1})
    assert page.json()["nextCursor"] == row["id"]
    after = await c.get("/webhook-deliveries", params={"after": row["id"]})
    assert after.json()["deliveries"] == []
    assert (await c.get("/webhook-deliveries", params={"status": "nope"})).status_code == 422


@pytest.mark.parametrize(
    ("callback", "field"),
    [
        ({"url": "http://10.0.0.7/hook"}, "callback.url"),
        ({"url": "http://169.254.169.254/latest/meta-data/"}, "callback.url"),
        ({"url": "http://[fe80::1]/hook"}, "callback.url"),
        ({"url": "gopher://example.com/"}, "callback.url"),
        ({"url": "http://example.com/", "events": ["exploded"]}, None),
        ({"url": "http://example.com/", "events": []}, None),
        ({"events": ["settled"]}, None),
        ({"url": "http://example.com/", "extra": 1}, None),
    ],
)
async def test_a_refused_callback_is_422_and_admits_nothing(
    asgi: Serve, callback: dict[str, Any], field: str | None
) -> None:
    server: Server = await asgi(
        {"echo": echo_agent()}, settings={"webhook_settings": WebhookSettings(secret=SECRET)}
    )
    answer = await server.client.post(
        "/agents/echo/acme", json={"body": "hi", "callback": callback}
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["type"] in ("invalid_dispatch", "invalid_request")
    if field is not None:
        assert error["type"] == "invalid_dispatch"
        assert field in error["message"]
    assert await server.store.list_submissions() == []
    assert (await server.client.get("/webhook-deliveries")).json()["deliveries"] == []
