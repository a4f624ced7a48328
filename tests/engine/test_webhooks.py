"""Outbound webhooks in the engine: a dispatch's callback and an agent's subscription are
delivered signed to a real loopback receiver, retried on the manual clock after 500s, given
up after the bound and resent; a crash between the event and the enqueue, or during an
attempt, loses no delivery; SSRF refusals write nothing."""

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tether import verify_signature
from tether.engine import (
    App,
    Callback,
    ManualClock,
    Runtime,
    WebhookAttempted,
    WebhookNotFound,
    WebhookSettings,
    WebhookSubscription,
    _outbox,
    _webhook_sender,
)
from tether.errors import InvalidDispatch
from tether.store import Store, WebhookStatus
from tether.testing.storetest import complete

from ..fakes.webhook_receiver import Received, webhook_receiver
from .agents import echo_agent
from .test_approvals import gates_agent
from .waits import advance_until, until_emitted

Make = Callable[..., Runtime]
SECRET = "whsec-test"
LOOPBACK = WebhookSettings(secret=SECRET, allow=["127.0.0.0/8"], backoff=1.0, max_backoff=8.0)


def checked(got: Received, clock: ManualClock) -> dict[str, Any]:
    """The delivery's JSON, once its signature checked (at the engine clock's time)."""
    assert got.method == "POST" and got.path == "/hooks/tether"
    assert got.headers["content-type"] == "application/json"
    assert verify_signature(
        got.body, got.headers["tether-signature"], SECRET, now=clock.now().timestamp()
    )
    assert not verify_signature(
        got.body + b" ", got.headers["tether-signature"], SECRET, now=clock.now().timestamp()
    )
    assert not verify_signature(
        got.body, got.headers["tether-signature"], "another", now=clock.now().timestamp()
    )
    body: dict[str, Any] = orjson.loads(got.body)
    assert body["id"] == got.headers["tether-delivery"]
    assert body["type"] == got.headers["tether-event"]
    return body


_HEARD: weakref.WeakKeyDictionary[Runtime, list[WebhookAttempted]] = weakref.WeakKeyDictionary()
"""Every ``WebhookAttempted`` each runtime of :func:`hooked` emitted, heard from its start
(an attempt may end before the test asks for it)."""


async def attempted(runtime: Runtime, delivery_id: str, outcome: str) -> WebhookAttempted:
    """The event of ``delivery_id``'s attempt that ended ``outcome``, awaited."""
    heard = _HEARD[runtime]

    async def ready() -> WebhookAttempted | None:
        return next(
            (e for e in heard if e.delivery_id == delivery_id and e.outcome == outcome), None
        )

    return await until_emitted(runtime, ready)


def hooked(make_runtime: Make, agents: dict[str, Any], **settings: Any) -> Runtime:
    """A runtime whose webhook attempts are all heard."""
    runtime = make_runtime(agents, **settings)
    heard = _HEARD.setdefault(runtime, [])

    def hear(event: object) -> None:
        if isinstance(event, WebhookAttempted):
            heard.append(event)

    runtime.instrumentation.observers.append(hear)
    return runtime


async def test_a_callback_tells_of_the_settlement_signed(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    async with webhook_receiver() as receiver:
        runtime = hooked(make_runtime, {"echo": echo_agent()}, webhook_settings=LOOPBACK)
        await runtime.start()
        receipt = await runtime.dispatch(
            "echo", "acme", "hi", callback={"url": receiver.url, "events": ["settled"]}
        )
        got = await receiver.next()
        body = checked(got, clock)
        assert body["type"] == "settled"
        assert body["submissionId"] == receipt.submission_id
        assert body["conversationId"] == receipt.conversation_id
        assert (body["agent"], body["instance"], body["session"]) == ("echo", "acme", "default")
        assert body["data"]["settlement"]["status"] == "succeeded"
        assert body["data"]["settlement"]["result"] == "echo: hi"
        await attempted(runtime, body["id"], "delivered")
        delivery = await runtime.webhook_delivery(body["id"])
        assert delivery.status is WebhookStatus.DELIVERED
        assert (delivery.attempts, delivery.last_status) == (1, 200)
        assert delivery.body == got.body
        listed = await runtime.webhook_deliveries(submission_id=receipt.submission_id)
        assert [row.id for row in listed] == [body["id"]]
        assert receiver.received.empty()


async def test_500s_are_retried_with_backoff_on_the_engine_clock(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    async with webhook_receiver([500, 503]) as receiver:
        runtime = hooked(make_runtime, {"echo": echo_agent()}, webhook_settings=LOOPBACK)
        await runtime.start()
        await runtime.dispatch("echo", "acme", "hi", callback=Callback(receiver.url))
        first = await receiver.next()
        delivery_id = first.headers["tether-delivery"]
        failed = await attempted(runtime, delivery_id, "pending")
        assert (failed.attempt, failed.answer, failed.error) == (1, 500, "answered HTTP 500")
        row = await runtime.webhook_delivery(delivery_id)
        assert row.next_attempt_at is not None
        wait = (row.next_attempt_at - clock.now()).total_seconds()
        assert 0.5 <= wait <= 1.0  # backoff 1 s, jittered down to half
        second = await advance_until(clock, receiver.next(), 0.25)
        assert second.headers["tether-delivery"] == delivery_id and second.body == first.body
        third = await advance_until(clock, receiver.next(), 0.25)
        assert third.status == 200 and third.body == first.body
        await attempted(runtime, delivery_id, "delivered")
        row = await runtime.webhook_delivery(delivery_id)
        assert (row.status, row.attempts, row.last_status) == (WebhookStatus.DELIVERED, 3, 200)


async def test_a_delivery_fails_after_its_attempts_and_is_resent(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    settings = WebhookSettings(secret=SECRET, allow=["127.0.0.0/8"], max_attempts=2, backoff=1)
    async with webhook_receiver([500, 500]) as receiver:
        runtime = hooked(make_runtime, {"echo": echo_agent()}, webhook_settings=settings)
        await runtime.start()
        await runtime.dispatch("echo", "acme", "hi", callback=Callback(receiver.url))
        delivery_id = (await receiver.next()).headers["tether-delivery"]
        await advance_until(clock, receiver.next(), 0.25)
        gave_up = await attempted(runtime, delivery_id, "failed")
        assert (gave_up.attempt, gave_up.answer) == (2, 500)
        assert (await runtime.webhook_delivery(delivery_id)).status is WebhookStatus.FAILED
        [failed] = await runtime.webhook_deliveries(status=WebhookStatus.FAILED)
        assert failed.id == delivery_id
        again = await runtime.resend_webhook(delivery_id)
        assert (again.status, again.attempts) == (WebhookStatus.PENDING, 0)
        resent = await receiver.next()
        assert resent.headers["tether-delivery"] == delivery_id and resent.status == 200
        await attempted(runtime, delivery_id, "delivered")
        with pytest.raises(WebhookNotFound):
            await runtime.resend_webhook("wh_absent")
        with pytest.raises(WebhookNotFound):
            await runtime.webhook_delivery(delivery_id, tenant="another")


async def test_an_agents_subscription_and_an_approval_request(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    async with webhook_receiver() as receiver:
        subscription = WebhookSubscription(
            receiver.url, events=("approval_requested", "settled"), agent="gated"
        )
        runtime = hooked(
            make_runtime,
            {"gated": gates_agent(), "echo": echo_agent()},
            webhook_settings=LOOPBACK,
            webhooks=[subscription],
        )
        await runtime.start()
        receipt = await runtime.dispatch("gated", "acme", "mail bob")
        body = checked(await receiver.next(), clock)
        assert body["type"] == "approval_requested"
        assert body["data"]["tool"] == "send_email"
        assert body["data"]["args"] == {"to": "bob0@example.com"}
        await runtime.approve(body["data"]["approvalId"], "approve", approver="ops")
        settled = checked(await receiver.next(), clock)
        assert settled["type"] == "settled" and settled["submissionId"] == receipt.submission_id
        other = await runtime.dispatch("echo", "acme", "hi")  # not the subscription's agent
        await runtime.wait(other.submission_id)
        assert await runtime.webhook_deliveries(submission_id=other.submission_id) == []


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:9/hook", "refused"),
        ("http://localhost/hook", "refused"),
        ("http://10.1.2.3/hook", "refused"),
        ("http://169.254.169.254/latest/meta-data", "refused"),
        ("http://[::1]/hook", "refused"),
        ("http://[::ffff:192.168.0.1]/hook", "refused"),
        ("http://192.168.1.10:8080/hook", "refused"),
        ("ftp://example.com/hook", "http or https"),
        ("http://user:pw@example.com/hook", "credentials"),
        ("not a url", "http or https"),
    ],
)
async def test_refused_callback_urls_admit_nothing(
    make_runtime: Make, store: Store, url: str, why: str
) -> None:
    runtime = hooked(
        make_runtime, {"echo": echo_agent()}, webhook_settings=WebhookSettings(secret=SECRET)
    )
    await runtime.start()
    with pytest.raises(InvalidDispatch, match=why) as refused:
        await runtime.dispatch("echo", "acme", "hi", callback={"url": url})
    assert refused.value.field is not None and refused.value.field.startswith("callback")
    assert await store.list_submissions() == []
    assert await runtime.webhook_deliveries() == []


async def test_a_callback_needs_a_secret_and_known_events(
    make_runtime: Make, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TETHER_WEBHOOK_SECRET", raising=False)
    runtime = hooked(make_runtime, {"echo": echo_agent()})
    await runtime.start()
    with pytest.raises(InvalidDispatch, match="secret"):
        await runtime.dispatch("echo", "acme", "hi", callback={"url": "https://example.com/h"})
    with pytest.raises(InvalidDispatch, match="unknown events"):
        await runtime.dispatch(
            "echo", "acme", "hi", callback={"url": "https://example.com/h", "events": ["x"]}
        )
    assert await store.list_submissions() == []
    with pytest.raises(ValueError, match="secret"):
        await make_runtime(
            {"echo": echo_agent()}, webhooks=[WebhookSubscription("https://example.com/h")]
        ).start()


async def test_a_crash_between_the_settlement_and_the_enqueue_loses_nothing(
    make_runtime: Make, store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first worker dies before it derives anything (its ``derive`` never runs); the
    held subscription survives in the store, and the next worker's sweep delivers it."""
    async with webhook_receiver() as receiver:
        with monkeypatch.context() as patched:

            async def dies(self: object, submission_id: str) -> int:
                return 0

            patched.setattr(_outbox.Outbox, "derive", dies)
            first = hooked(make_runtime, {"echo": echo_agent()}, webhook_settings=LOOPBACK)
            await first.start()
            receipt = await first.dispatch("echo", "acme", "hi", callback=Callback(receiver.url))
            assert (await first.wait(receipt.submission_id))["status"] == "succeeded"
            await first.close()
        [held] = await complete(store).list_webhook_deliveries()
        assert held.status is WebhookStatus.HELD  # settled, and nothing derived from it
        assert receiver.received.empty()
        second = hooked(make_runtime, {"echo": echo_agent()}, webhook_settings=LOOPBACK)
        await second.start()  # its first pass sweeps the held subscriptions
        got = checked(await receiver.next(), clock)
        assert got["id"] == held.id and got["type"] == "settled"


async def test_a_crash_during_an_attempt_is_attempted_again_after_the_lease(
    make_runtime: Make, store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with webhook_receiver() as receiver:
        with monkeypatch.context() as patched:
            hung = asyncio.Event()

            async def hangs(self: object, delivery: object) -> int:
                hung.set()
                await asyncio.Event().wait()  # the worker dies in the attempt
                raise AssertionError("unreachable")

            patched.setattr(_webhook_sender.WebhookSender, "_post", hangs)
            first = hooked(make_runtime, {"echo": echo_agent()}, webhook_settings=LOOPBACK)
            await first.start()
            await first.dispatch("echo", "acme", "hi", callback=Callback(receiver.url))
            async with asyncio.timeout(60):
                await hung.wait()
            await first.close()
        [leased] = await complete(store).list_webhook_deliveries()
        assert (leased.status, leased.attempts) == (WebhookStatus.PENDING, 1)
        second = hooked(make_runtime, {"echo": echo_agent()}, webhook_settings=LOOPBACK)
        await second.start()
        got = await advance_until(clock, receiver.next(), 5.0)  # past the first's lease
        assert got.headers["tether-delivery"] == leased.id
        done = await attempted(second, leased.id, "delivered")
        assert done.attempt == 2


async def test_a_redirect_is_not_followed(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    async with webhook_receiver([302]) as receiver:
        runtime = hooked(make_runtime, {"echo": echo_agent()}, webhook_settings=LOOPBACK)
        await runtime.start()
        await runtime.dispatch("echo", "acme", "hi", callback=Callback(receiver.url))
        delivery_id = (await receiver.next()).headers["tether-delivery"]
        redirected = await attempted(runtime, delivery_id, "pending")
        assert redirected.answer == 302
        assert redirected.error == "answered HTTP 302 (redirects are not followed)"
        assert len(receiver.log) == 1  # nothing went where the redirect pointed
        await advance_until(clock, receiver.next(), 0.25)
        await attempted(runtime, delivery_id, "delivered")


async def test_erasing_a_session_erases_its_deliveries(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    async with webhook_receiver() as receiver:
        runtime = hooked(make_runtime, {"echo": echo_agent()}, webhook_settings=LOOPBACK)
        await runtime.start()
        kept = await runtime.dispatch(
            "echo", "acme", "keep", session="kept", callback=Callback(receiver.url)
        )
        gone = await runtime.dispatch("echo", "acme", "secret", callback=Callback(receiver.url))
        for _ in range(2):
            delivery_id = (await receiver.next()).headers["tether-delivery"]
            await attempted(runtime, delivery_id, "delivered")
        await runtime.erase_session("echo", "acme")
        assert await runtime.webhook_deliveries(submission_id=gone.submission_id) == []
        [left] = await runtime.webhook_deliveries()
        assert left.submission_id == kept.submission_id


def test_an_app_declares_its_subscriptions_and_settings() -> None:
    subscription = WebhookSubscription("https://ops.example.com/hooks", agent="echo")
    settings = WebhookSettings(secret=SECRET, max_attempts=3)
    app = App({"echo": echo_agent()}, webhooks=[subscription], webhook_settings=settings)
    runtime = Runtime.from_app(app, "memory://")
    assert runtime.config.webhooks == [subscription]
    assert runtime.config.webhook_settings is settings
    with pytest.raises(ValueError, match="unknown events"):
        WebhookSubscription("https://x.example/", events=("exploded",))
    with pytest.raises(ValueError, match="max_attempts"):
        WebhookSettings(max_attempts=0)
