"""GitHub's webhook (issue 24, item 3) on a real server: a signed delivery is one signal
dispatch to the issue's session; a redelivery gets the same 202, a changed payload under the
same delivery id 409, a bad or missing signature 401; nothing is stored for a refusal."""

import hashlib
import hmac
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from fastapi import APIRouter

from tether.engine import Runtime
from tether.http.webhooks import (
    GITHUB,
    Delivery,
    HmacScheme,
    WebhookTarget,
    github_webhook,
    webhook_router,
)
from tether.records import Signal

from ...engine.agents import echo_agent
from ..conftest import Server

Serve = Callable[..., Any]
SECRET = "It's a Secret to Everybody"
TOKEN = "api-token"


def _issue_session(delivery: Delivery) -> WebhookTarget | None:
    payload = delivery.payload
    issue = payload.get("issue") if isinstance(payload, dict) else None
    if not isinstance(issue, dict):
        return None  # a ping, say: acknowledged, nothing admitted
    return WebhookTarget("bot", "octo.repo", session=f"issue-{issue['number']}")


def _hooks(runtime: Runtime) -> Sequence[APIRouter]:
    return [github_webhook(runtime, secret=[SECRET, "the-next-secret"], target=_issue_session)]


def _signed(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def _deliver(
    server: Server,
    payload: dict[str, Any],
    *,
    delivery: str = "72d3162e-cc78-11e3-81ab-4c9367dc0958",
    event: str = "issues",
    signature: str | None = "good",
    body: bytes | None = None,
) -> Any:
    raw = body if body is not None else orjson.dumps(payload)
    headers = {"content-type": "application/json", "x-github-event": event}
    if delivery:
        headers["x-github-delivery"] = delivery
    if signature == "good":
        headers["x-hub-signature-256"] = _signed(raw)
    elif signature is not None:
        headers["x-hub-signature-256"] = signature
    return await server.client.post("/webhooks/github", content=raw, headers=headers)


OPENED = {"action": "opened", "issue": {"number": 7, "title": "It breaks"}}


async def test_a_signed_delivery_becomes_one_signal_to_the_issues_session(asgi: Serve) -> None:
    server: Server = await asgi({"bot": echo_agent()}, webhooks=_hooks, auth_token=TOKEN)
    answer = await _deliver(server, OPENED)
    assert answer.status_code == 202, answer.text
    receipt = answer.json()
    assert receipt["accepted"] is True and receipt["duplicate"] is False
    assert (receipt["delivery"], receipt["event"], receipt["session"]) == (
        "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "issues",
        "issue-7",
    )
    assert answer.headers["location"] == f"/submissions/{receipt['submissionId']}"
    assert receipt["streamUrl"] == "/agents/bot/octo.repo?session=issue-7"
    settled = await server.runtime.wait(receipt["submissionId"])
    assert settled is not None
    records = await server.runtime.records(receipt["conversationId"])
    [signal] = [record.payload for record in records if isinstance(record.payload, Signal)]
    assert signal.type == "github.issues.opened"
    assert orjson.loads(signal.body) == OPENED
    assert signal.sender == {
        "source": "github",
        "delivery": receipt["delivery"],
        "event": "issues",
    }

    # GitHub redelivers: the same 202, nothing new admitted.
    again = await _deliver(server, OPENED)
    assert again.status_code == 202
    assert again.json() == {**receipt, "duplicate": True}
    # Another payload under the same delivery id is a conflict.
    changed = await _deliver(server, {**OPENED, "action": "closed"})
    assert changed.status_code == 409 and changed.json()["error"]["type"] == "dispatch_conflict"
    # A rotated secret signs too.
    rotated = orjson.dumps({"issue": {"number": 8}})
    headers = {
        "content-type": "application/json",
        "x-github-event": "issues",
        "x-github-delivery": "d-2",
        "x-hub-signature-256": _signed(rotated, "the-next-secret"),
    }
    newer = await server.client.post("/webhooks/github", content=rotated, headers=headers)
    assert newer.status_code == 202 and newer.json()["session"] == "issue-8"
    # The bearer token still guards the rest of the API.
    assert (await server.client.get("/sessions")).status_code == 401


async def test_a_refused_delivery_stores_nothing(asgi: Serve) -> None:
    server: Server = await asgi({"bot": echo_agent()}, webhooks=_hooks, auth_token=TOKEN)
    body = orjson.dumps(OPENED)
    refusals = [
        (await _deliver(server, OPENED, signature=None), 401, "invalid_signature"),
        (await _deliver(server, OPENED, signature="sha256=" + "0" * 64), 401, "invalid_signature"),
        (
            await _deliver(server, OPENED, signature=_signed(body, "wrong")),
            401,
            "invalid_signature",
        ),
        (await _deliver(server, OPENED, signature=_signed(body)[7:]), 401, "invalid_signature"),
        (await _deliver(server, OPENED, delivery=""), 400, "invalid_delivery"),
        (await _deliver(server, OPENED, delivery="a b"), 400, "invalid_delivery"),
        (await _deliver(server, OPENED, event="x" * 101), 400, "invalid_delivery"),
        (await _deliver(server, OPENED, body=b"not json"), 400, "malformed_json"),
        (await _deliver(server, OPENED, body=b'"\xff"'), 400, "malformed_json"),
    ]
    for answer, status, kind in refusals:
        assert answer.status_code == status, answer.text
        assert answer.json()["error"]["type"] == kind
    # A ping (no issue) is acknowledged and admits nothing.
    ping = await _deliver(server, {"zen": "Keep it logically awesome."}, event="ping")
    assert ping.status_code == 202
    assert ping.json() == {
        "delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "event": "ping",
        "accepted": False,
        "duplicate": False,
    }
    page = await server.runtime.sessions()
    assert page.sessions == ()


async def test_a_provider_of_ones_own(asgi: Serve) -> None:
    """Another provider's scheme and headers; an async target."""

    async def orders(delivery: Delivery) -> WebhookTarget:
        return WebhookTarget("bot", "shop", signal_type="order.paid")

    def hooks(runtime: Runtime) -> Sequence[APIRouter]:
        scheme = HmacScheme(header="X-Shop-Signature", digest="sha512")
        return [
            webhook_router(
                runtime,
                path="/webhooks/shop",
                secret=b"shop-secret",
                target=orders,
                scheme=scheme,
                source="shop",
                delivery_header="X-Shop-Delivery",
                event_header="X-Shop-Topic",
            )
        ]

    server: Server = await asgi({"bot": echo_agent()}, webhooks=hooks)
    body = b'{"order": 1}'
    signature = hmac.new(b"shop-secret", body, hashlib.sha512).hexdigest()
    headers = {
        "content-type": "application/json",
        "x-shop-signature": signature.upper(),
        "x-shop-delivery": "o-1",
        "x-shop-topic": "orders",
    }
    answer = await server.client.post("/webhooks/shop", content=body, headers=headers)
    assert answer.status_code == 202, answer.text
    await server.runtime.wait(answer.json()["submissionId"])
    records = await server.runtime.records(answer.json()["conversationId"])
    [signal] = [record.payload for record in records if isinstance(record.payload, Signal)]
    assert signal.type == "order.paid"


def test_a_webhook_is_checked_when_made() -> None:
    runtime = Runtime({"bot": echo_agent()}, "memory://")
    for secret in ("", " ", [], [b""]):
        with pytest.raises(ValueError, match="non-empty secret"):
            github_webhook(runtime, secret=secret, target=_issue_session)
    with pytest.raises(ValueError, match="starts with '/'"):
        webhook_router(runtime, path="hooks", secret="s", target=_issue_session)
    with pytest.raises(ValueError):
        HmacScheme(header="X-Sig", digest="nope")
    with pytest.raises(ValueError, match="header"):
        HmacScheme(header=" ")
    assert GITHUB.verify(b"{}", {"x-hub-signature-256": _signed(b"{}")}, [SECRET.encode()])
