"""Outbound webhooks as an application declares them: a dispatch's ``Callback``, an
agent's ``WebhookSubscription``, and the ``WebhookSettings`` every delivery is made with
(the signing secret, the SSRF allowance, retries) (docs/how-to/webhooks.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tether.errors import InvalidDispatch, NotFound
from tether.store import WEBHOOK_EVENTS

__all__ = (
    "ALLOW_VARIABLE",
    "SECRET_VARIABLE",
    "Callback",
    "WebhookNotFound",
    "WebhookSettings",
    "WebhookSubscription",
    "parse_callback",
)

SECRET_VARIABLE: Final = "TETHER_WEBHOOK_SECRET"
"""Where the signing secret is read from (the runtime's ``env``, then the process's) when
``WebhookSettings.secret`` is not set."""

ALLOW_VARIABLE: Final = "TETHER_WEBHOOK_ALLOW"
"""Networks (CIDR, comma-separated) a delivery may go to although they are private, loopback
or link-local, added to ``WebhookSettings.allow`` (``127.0.0.0/8`` for a local receiver)."""

_MAX_EVENTS: Final = len(WEBHOOK_EVENTS)


def _events(events: Sequence[str], field_name: str) -> tuple[str, ...]:
    if isinstance(events, str) or not events:
        raise InvalidDispatch(f"a non-empty list of {', '.join(WEBHOOK_EVENTS)}", field=field_name)
    unknown = [event for event in events if event not in WEBHOOK_EVENTS]
    if unknown:
        raise InvalidDispatch(
            f"unknown events {unknown!r} (known: {', '.join(WEBHOOK_EVENTS)})", field=field_name
        )
    return tuple(event for event in WEBHOOK_EVENTS if event in events)


@dataclass(frozen=True, slots=True)
class Callback:
    """Where a dispatch's submission tells of ``events`` (``settled``,
    ``approval_requested``, ``input_requested``): each is a signed ``POST`` of JSON to
    ``url``, retried until it is answered 2xx (docs/how-to/webhooks.md).

    Example::

        await runtime.dispatch("support", "acme", "refund order 42",
                               callback=Callback("https://example.com/hooks/tether",
                                                 events=("settled", "approval_requested")))
    """

    url: str
    events: tuple[str, ...] = ("settled",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", _events(self.events, "callback.events"))


def parse_callback(value: Callback | Mapping[str, Any]) -> Callback:
    """A dispatch's ``callback`` as given (``{"url": ..., "events": [...]}``), checked;
    ``InvalidDispatch`` naming the field otherwise."""
    if isinstance(value, Callback):
        return value
    if not isinstance(value, Mapping):
        raise InvalidDispatch("an object with url and events", field="callback")
    extra = set(value) - {"url", "events"}
    if extra:
        raise InvalidDispatch(f"unknown fields {sorted(extra)!r}", field="callback")
    url = value.get("url")
    if not isinstance(url, str):
        raise InvalidDispatch("a URL string", field="callback.url")
    events = value.get("events", ["settled"])
    if not isinstance(events, list | tuple) or not all(isinstance(e, str) for e in events):
        raise InvalidDispatch("a list of event names", field="callback.events")
    if len(events) > 3 * _MAX_EVENTS:
        raise InvalidDispatch("too many events", field="callback.events")
    return Callback(url, tuple(events))


@dataclass(frozen=True, slots=True)
class WebhookSubscription:
    """An application's standing subscription: every submission dispatched to ``agent``
    (``None``: to any agent) tells ``url`` of ``events``, as a dispatch's
    :class:`Callback` would.

    Example::

        App(agents, webhooks=[WebhookSubscription("https://ops.example.com/hooks",
                                                  agent="support",
                                                  events=("settled", "input_requested"))])
    """

    url: str
    events: tuple[str, ...] = ("settled",)
    agent: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "events", _events(self.events, "events"))
        except InvalidDispatch as exc:
            raise ValueError(f"WebhookSubscription({self.url!r}): {exc}") from None


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """How outbound webhooks are delivered.

    ``secret`` signs every delivery (``None``: ``TETHER_WEBHOOK_SECRET``; with neither, a
    dispatch with a callback is refused). ``allow``: networks (CIDR) a delivery may go to
    although they are private, loopback or link-local (refused by default: SSRF).
    ``max_attempts`` bounds the attempts of one delivery (then it is ``failed``, until
    resent); the n-th retry waits ``backoff * 2**(n-1)`` seconds, at most ``max_backoff``,
    times a random factor in [0.5, 1]. ``timeout``: seconds an attempt may take. ``poll``:
    how often a worker looks for due deliveries (the engine's clock); ``sweep``: how often
    it derives the deliveries of every open subscription from the store (what a crash
    between an event and its delivery's enqueue would otherwise lose).

    Example::

        App(agents, webhook_settings=WebhookSettings(secret=os.environ["HOOK_SECRET"],
                                                     max_attempts=12))
    """

    secret: str | None = None
    allow: Sequence[str] = ()
    max_attempts: int = 10
    backoff: float = 5.0
    max_backoff: float = 3600.0
    timeout: float = 10.0
    poll: float = 1.0
    sweep: float = 30.0
    batch: int = 16

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("WebhookSettings.max_attempts must be at least 1")
        for name in ("backoff", "max_backoff", "timeout", "poll", "sweep"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"WebhookSettings.{name} must be a finite number >= 0")
        if self.timeout <= 0 or self.poll <= 0:
            raise ValueError("WebhookSettings.timeout and poll must be positive")
        if self.batch < 1:
            raise ValueError("WebhookSettings.batch must be at least 1")
        if self.secret is not None and not self.secret.strip():
            raise ValueError("WebhookSettings.secret must not be empty")


class WebhookNotFound(NotFound):
    """No webhook delivery has this id (or it is another tenant's)."""

    code = "webhook_not_found"

    def __init__(self, delivery_id: str) -> None:
        self.delivery_id = delivery_id
        super().__init__(f"no webhook delivery {delivery_id!r}")
