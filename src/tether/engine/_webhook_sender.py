"""The task that sends a worker's outbound webhooks: it derives what is owed (nudged by the
engine's events, and by a periodic sweep of the store), claims the due deliveries, POSTs
each signed (``Tether-Signature``), and records the answer: delivered on a 2xx, else again
later with exponential backoff and jitter, up to ``WebhookSettings.max_attempts`` (then
``failed``). At least once: a worker that dies in an attempt leaves the delivery due again
when its claim's lease runs out; the receiver dedupes by ``Tether-Delivery``."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Final
from urllib.parse import urlsplit

import httpx
import orjson

from tether._signing import SIGNATURE_HEADER, signature_header
from tether._tasks import cancel_and_wait
from tether.engine._clock import Clock
from tether.engine._observe import (
    Correlation,
    EngineEvent,
    SubmissionSettledEvent,
    SubmissionWaiting,
    WebhookAttempted,
)
from tether.engine._outbox import Outbox
from tether.engine._ssrf import Network, resolve_webhook_host
from tether.engine._webhooks import WebhookSettings
from tether.errors import InvalidDispatch, TetherError
from tether.store import WebhookDelivery, WebhookStatus, WebhookStore

__all__ = ("DELIVERY_HEADER", "EVENT_HEADER", "WebhookSender", "retry_delay")

logger = logging.getLogger("tether.engine")

DELIVERY_HEADER: Final = "Tether-Delivery"
EVENT_HEADER: Final = "Tether-Event"
_ERROR_LIMIT: Final = 500
_NUDGING_WAITS: Final = frozenset({"approval", "input"})


def retry_delay(settings: WebhookSettings, attempts: int, rng: random.Random) -> float:
    """Seconds before the retry that follows attempt number ``attempts``: ``backoff``
    doubled each attempt, at most ``max_backoff``, times a random factor in [0.5, 1]."""
    base = min(settings.backoff * 2.0 ** min(attempts - 1, 60), settings.max_backoff)
    return base * rng.uniform(0.5, 1.0)


class WebhookSender:
    """A worker's webhook delivery loop (see the module's doc)."""

    def __init__(
        self,
        outbox: Outbox,
        store: WebhookStore,
        clock: Clock,
        settings: WebhookSettings,
        *,
        secret: str,
        allow: Sequence[Network],
        emit: Callable[[EngineEvent], Awaitable[None]],
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.outbox = outbox
        self.store = store
        self.clock = clock
        self.settings = settings
        self.secret = secret
        self.allow = tuple(allow)
        self.emit = emit
        self.wake = asyncio.Event()
        """Set to look again now (an event nudged a submission, a resend)."""
        self._transport = transport
        self._nudged: set[str] = set()
        self._next_sweep = 0.0
        self._rng = random.Random()
        self._client: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._client = httpx.AsyncClient(
            follow_redirects=False,  # a redirect is not followed: it could lead anywhere
            timeout=self.settings.timeout,
            transport=self._transport,
            trust_env=False,  # no proxy: the address checked is the one connected to
        )
        self._next_sweep = self.clock.monotonic()
        self._task = asyncio.create_task(self._loop(), name="tether-webhooks")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def heard(self, event: EngineEvent) -> None:
        """An observer: a settlement, or a wait for a person, may owe deliveries."""
        if isinstance(event, SubmissionSettledEvent) or (
            isinstance(event, SubmissionWaiting) and event.reason in _NUDGING_WAITS
        ):
            self.nudge(event.correlation.submission_id)

    def nudge(self, submission_id: str | None = None) -> None:
        """Derive ``submission_id``'s deliveries (if given) and look for due ones, now."""
        if submission_id is not None:
            self._nudged.add(submission_id)
        self.wake.set()

    async def _loop(self) -> None:
        while True:
            more = False
            try:
                more = await self.tick()
            except TetherError:
                logger.exception("webhook pass failed; retrying")
            if not more:
                await self.clock.wait_event(self.wake, self.settings.poll)
                self.wake.clear()

    async def tick(self) -> bool:
        """One pass: derive what was nudged (and, when due, sweep), then attempt the due
        deliveries. Whether a whole batch was claimed (more may be due)."""
        nudged, self._nudged = self._nudged, set()
        for submission_id in sorted(nudged):
            await self.outbox.derive(submission_id)
        if self.clock.monotonic() >= self._next_sweep:
            self._next_sweep = self.clock.monotonic() + self.settings.sweep
            await self.outbox.sweep()
        now = self.clock.now()
        lease = timedelta(seconds=self.settings.timeout * 2 + 5)
        claimed = await self.store.claim_webhook_deliveries(
            now, lease_until=now + lease, limit=self.settings.batch
        )
        if claimed:
            await asyncio.gather(*(self._attempt(delivery) for delivery in claimed))
        return len(claimed) == self.settings.batch

    async def _attempt(self, delivery: WebhookDelivery) -> None:
        answer: int | None = None
        error: str | None = None
        try:
            answer = await self._post(delivery)
            if not 200 <= answer < 300:
                error = f"answered HTTP {answer}"
                if 300 <= answer < 400:
                    error += " (redirects are not followed)"
        except InvalidDispatch as exc:  # the URL's host resolves to a refused address now
            error = str(exc)
        except (httpx.HTTPError, OSError, TimeoutError) as exc:
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        now = self.clock.now()
        if error is None:
            status, next_at = WebhookStatus.DELIVERED, None
        elif delivery.attempts >= self.settings.max_attempts:
            status, next_at = WebhookStatus.FAILED, None
            logger.warning("webhook %s to %s failed: %s", delivery.id, delivery.url, error)
        else:
            delay = retry_delay(self.settings, delivery.attempts, self._rng)
            status, next_at = WebhookStatus.PENDING, now + timedelta(seconds=delay)
        last_error = None if error is None else error[:_ERROR_LIMIT]
        await self.store.finish_webhook_attempt(
            delivery.id,
            attempt=delivery.attempts,
            status=status,
            next_attempt_at=next_at,
            last_status=answer,
            last_error=last_error,
            now=now,
        )
        await self.emit(
            WebhookAttempted(
                _correlation(delivery),
                delivery_id=delivery.id,
                url=delivery.url,
                event=delivery.event,
                attempt=delivery.attempts,
                outcome=status.value,
                answer=answer,
                error=last_error,
            )
        )

    async def _post(self, delivery: WebhookDelivery) -> int:
        """POST the delivery to an address its host resolves to, every one checked (the
        connection goes to the address checked: a name that resolves again elsewhere
        between the check and the connection cannot move it)."""
        assert self._client is not None  # started
        if delivery.body is None:
            raise InvalidDispatch("the delivery has no body", field="callback")
        addresses = await resolve_webhook_host(delivery.url, self.allow)
        if not addresses:
            raise InvalidDispatch("its host resolves to no address", field="callback.url")
        parts = urlsplit(delivery.url)
        host = parts.hostname
        assert host is not None  # checked by resolve_webhook_host
        address = addresses[0]
        literal = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
        netloc = literal if parts.port is None else f"{literal}:{parts.port}"
        headers = {
            "Host": parts.netloc,
            "Content-Type": "application/json",
            "User-Agent": "tether-webhooks",
            DELIVERY_HEADER: delivery.id,
            EVENT_HEADER: delivery.event,
            SIGNATURE_HEADER: signature_header(
                delivery.body, self.secret, timestamp=int(self.clock.now().timestamp())
            ),
        }
        extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
        async with asyncio.timeout(self.settings.timeout):
            async with self._client.stream(
                "POST",
                parts._replace(netloc=netloc).geturl(),
                content=delivery.body,
                headers=headers,
                extensions=extensions,
            ) as response:
                return response.status_code


def _correlation(delivery: WebhookDelivery) -> Correlation:
    conversation_id = ""
    try:  # the body names the conversation (the row keeps only the submission)
        named = orjson.loads(delivery.body or b"{}").get("conversationId")
        conversation_id = named if isinstance(named, str) else ""
    except (orjson.JSONDecodeError, AttributeError):
        pass
    return Correlation(delivery.key, conversation_id, delivery.submission_id)
