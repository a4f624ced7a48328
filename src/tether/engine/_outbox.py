"""The outbound webhook outbox's derivation: which deliveries a submission's subscriptions
owe, as the store says (docs/how-to/webhooks.md).

A subscription is a ``held`` row (event ``settled``) written when its submission is
dispatched. Whatever happens to the submission is derived from the store, never from an
event alone: :meth:`Outbox.derive` lists the submission's pending gates and puts a
delivery for each asked-for one, and releases the held row once the submission settled.
Every delivery's id is a digest of what caused it, so deriving twice (an observer's nudge,
then the periodic sweep; two workers) puts each delivery once; and a crash between the
event's commit and the delivery's put loses nothing: the next sweep derives it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import orjson

from tether.engine._clock import Clock
from tether.engine._webhooks import Callback, WebhookSubscription
from tether.errors import SubmissionNotFound
from tether.store import (
    Gate,
    GateKind,
    GateStatus,
    GateStore,
    Store,
    Submission,
    SubmissionStatus,
    WebhookDelivery,
    WebhookStatus,
    WebhookStore,
)

__all__ = ("Outbox", "delivery_id", "targets_of")

logger = logging.getLogger("tether.engine")

_GATE_EVENTS: Final = {GateKind.APPROVAL: "approval_requested", GateKind.INPUT: "input_requested"}
_GATE_PAGE: Final = 100
_GATE_PAGES: Final = 10
"""A derivation reads at most this many pages of an instance's pending gates."""
_SWEEP_PAGE: Final = 200


def delivery_id(submission_id: str, url: str, event: str, cause: str = "") -> str:
    """A delivery's stable id: a digest of its submission, URL, event and cause (a gate's
    id), so that the same delivery derived again is the same row."""
    digest = hashlib.sha256("\x00".join((submission_id, url, event, cause)).encode())
    return "wh_" + digest.hexdigest()[:32]


def targets_of(
    agent: str, callback: Callback | None, subscriptions: Sequence[WebhookSubscription]
) -> dict[str, tuple[str, ...]]:
    """The URLs a submission of ``agent`` tells, each with the events it asked for (a URL
    named twice asks for the union)."""
    wanted: dict[str, set[str]] = {}
    if callback is not None:
        wanted.setdefault(callback.url, set()).update(callback.events)
    for subscription in subscriptions:
        if subscription.agent is None or subscription.agent == agent:
            wanted.setdefault(subscription.url, set()).update(subscription.events)
    return {url: tuple(sorted(events)) for url, events in wanted.items()}


def _body(event: str, delivery: str, submission: Submission, at: datetime, data: Any) -> bytes:
    key = submission.key
    return orjson.dumps(
        {
            "id": delivery,
            "type": event,
            "createdAt": at.isoformat(),
            "agent": key.agent,
            "instance": key.instance,
            "session": key.session,
            "submissionId": submission.id,
            "conversationId": submission.conversation_id,
            "data": data,
        }
    )


class Outbox:
    """Puts and derives a runtime's webhook deliveries (see the module's doc)."""

    def __init__(
        self,
        store: Store,
        outbox: WebhookStore,
        gates: GateStore | None,
        clock: Clock,
        subscriptions: Sequence[WebhookSubscription],
    ) -> None:
        self.store = store
        self.outbox = outbox
        self.gates = gates
        self.clock = clock
        self.subscriptions = tuple(subscriptions)

    async def subscribe(self, submission: Submission, callback: Callback | None) -> bool:
        """Hold a row for each URL ``submission`` tells (its ``callback``, its agent's
        subscriptions), then derive what is owed already (it may have settled while the rows
        were written). Whether it has any subscription."""
        targets = targets_of(submission.key.agent, callback, self.subscriptions)
        if not targets:
            return False
        now = self.clock.now()
        await self.outbox.put_webhook_deliveries(
            [
                WebhookDelivery(
                    id=delivery_id(submission.id, url, "settled"),
                    url=url,
                    event="settled",
                    key=submission.key,
                    submission_id=submission.id,
                    created_at=now,
                    status=WebhookStatus.HELD,
                    events=events,
                    tenant=submission.tenant,
                )
                for url, events in targets.items()
            ]
        )
        await self.derive(submission.id)
        return True

    async def derive(self, submission_id: str) -> int:
        """Put what ``submission_id``'s held subscriptions owe now; how many deliveries
        became due (put or released)."""
        held = await self.outbox.list_webhook_deliveries(
            submission_id=submission_id, status=WebhookStatus.HELD
        )
        if not held:
            return 0
        try:
            submission = await self.store.get_submission(submission_id)
        except SubmissionNotFound:  # erased: nothing more will happen to it
            for row in held:
                await self.outbox.release_webhook_delivery(row.id, body=None, now=self.clock.now())
            return 0
        due = await self._gate_deliveries(submission, held)
        if submission.status is SubmissionStatus.SETTLED:
            at = submission.settled_at or self.clock.now()
            data = {"settlement": dict(submission.settlement or {})}
            for row in held:
                body = None
                if "settled" in row.events:
                    body = _body("settled", row.id, submission, at, data)
                released = await self.outbox.release_webhook_delivery(
                    row.id, body=body, now=self.clock.now()
                )
                due += int(released and body is not None)
        return due

    async def _gate_deliveries(
        self, submission: Submission, held: Sequence[WebhookDelivery]
    ) -> int:
        kinds = [
            kind for kind, event in _GATE_EVENTS.items() if any(event in row.events for row in held)
        ]
        if not kinds or self.gates is None:
            return 0
        new: list[WebhookDelivery] = []
        for kind in kinds:
            event = _GATE_EVENTS[kind]
            after: str | None = None
            for _ in range(_GATE_PAGES):
                page = await self.gates.list_gates(
                    status=GateStatus.PENDING,
                    agent=submission.key.agent,
                    instance=submission.key.instance,
                    kind=kind,
                    limit=_GATE_PAGE,
                    after=after,
                )
                for gate in page:
                    if gate.submission_id != submission.id:
                        continue
                    data = _gate_data(gate)
                    for row in held:
                        if event not in row.events:
                            continue
                        identity = delivery_id(submission.id, row.url, event, gate.approval_id)
                        new.append(
                            WebhookDelivery(
                                id=identity,
                                url=row.url,
                                event=event,
                                key=submission.key,
                                submission_id=submission.id,
                                created_at=self.clock.now(),
                                events=(event,),
                                body=_body(event, identity, submission, gate.requested_at, data),
                                next_attempt_at=self.clock.now(),
                                tenant=submission.tenant,
                            )
                        )
                if len(page) < _GATE_PAGE:
                    break
                after = page[-1].cursor
        if new:
            await self.outbox.put_webhook_deliveries(new)
        return len(new)

    async def sweep(self) -> int:
        """Derive every held subscription's deliveries (what a crash may have left
        underived); how many became due."""
        due = 0
        seen: set[str] = set()
        after: str | None = None
        while True:
            page = await self.outbox.list_webhook_deliveries(
                status=WebhookStatus.HELD, limit=_SWEEP_PAGE, after=after
            )
            for row in page:
                if row.submission_id not in seen:
                    seen.add(row.submission_id)
                    due += await self.derive(row.submission_id)
            if len(page) < _SWEEP_PAGE:
                return due
            after = page[-1].id


def _gate_data(gate: Gate) -> dict[str, Any]:
    if gate.kind is GateKind.INPUT:
        return {"inputId": gate.approval_id, "prompt": gate.prompt, "callId": gate.call_id}
    return {
        "approvalId": gate.approval_id,
        "tool": gate.tool,
        "args": dict(gate.args),
        "callId": gate.call_id,
    }
