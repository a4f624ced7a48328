"""What the HTTP API takes: the JSON request bodies of its routes (a schedule's and a
version upgrade's in ``_schedules`` and ``_versions``)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    AwareDatetime,
    Field,
    JsonValue,
)

from tether._budget import Budget
from tether._inbound import InboundKind, SignalInfo
from tether._limits import MAX_SEQ, PRIORITY_MAX, PRIORITY_MIN
from tether._payloads import AttachmentRef
from tether._states import Decision
from tether.wire._base import RequestBody

__all__ = (
    "AnswerBody",
    "BudgetDecisionBody",
    "CallbackBody",
    "DecisionBody",
    "DispatchBody",
    "ForkBody",
    "MessageBody",
    "MetadataPatch",
    "SessionBody",
)

MetadataPatch = dict[str, str | bool | int | float | None]
"""An RFC 7396 merge patch of a session's metadata: each key set to a string, a number or a
boolean, or removed by ``null`` (bounds: ``tether.store.METADATA_LIMITS``)."""


class CallbackBody(RequestBody):
    url: str = Field(
        min_length=1,
        max_length=2048,
        description="Where the events are POSTed: http(s), its host a public address "
        "(private, loopback and link-local ones are refused unless the server allows them).",
    )
    events: list[Literal["settled", "approval_requested", "input_requested"]] = Field(
        default=["settled"], min_length=1, max_length=3
    )


class DispatchBody(RequestBody):
    kind: InboundKind = "user"
    body: str = ""
    signal: SignalInfo | None = None
    attachments: list[AttachmentRef] | None = None
    result_schema: dict[str, JsonValue] | None = None
    result_retries: int | None = Field(default=None, ge=0, le=10)
    budget: Budget | None = Field(
        default=None,
        description="Limits on this submission's spending, each over the agent's and the "
        "application's (docs/budgets.md).",
    )
    priority: int | None = Field(
        default=None,
        strict=True,
        ge=PRIORITY_MIN,
        le=PRIORITY_MAX,
        description="Higher is claimed first among other sessions' queued submissions, "
        "aged so that none waits forever; a session's own keep their order "
        "(docs/priorities.md). Absent: the agent's default, else 0.",
    )
    callback: CallbackBody | None = Field(
        default=None,
        description="Tell a URL of this submission's events, each a signed POST "
        "(``Tether-Signature``) retried from a durable outbox (docs/how-to/webhooks.md).",
    )
    metadata: MetadataPatch | None = Field(
        default=None,
        description="Merged into the session's metadata (an RFC 7396 merge patch: ``null`` "
        "removes a key); a new session starts with it. At most 64 keys of 1..64 characters, "
        "string, number or boolean values, 8 KiB serialized (422 ``invalid_metadata``).",
    )
    session: str = "default"
    dispatch_id: str | None = Field(default=None, min_length=1, max_length=200)
    run_at: AwareDatetime | None = Field(
        default=None,
        description="Run it at this time (RFC 3339, with an offset): it is admitted "
        "``scheduled`` until then, holding its session's later messages behind it "
        "(docs/timers.md). Not with ``afterSeconds``; not in the past.",
    )
    after_seconds: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Run it this many seconds from now: as ``runAt``.",
    )


class MessageBody(RequestBody):
    body: str = Field(min_length=1)
    session: str = "default"


class SessionBody(RequestBody):
    session: str = "default"


class DecisionBody(RequestBody):
    decision: Decision
    reason: str | None = None
    args: dict[str, JsonValue] | None = None
    approver: str = Field(default="api", min_length=1, max_length=200)


class BudgetDecisionBody(RequestBody):
    decision: Literal["approve", "reject"] = Field(
        description="approve: extend the budget by ``extension`` and resume the run; reject: "
        "settle it ``budget_exhausted`` with its partial answer."
    )
    extension: Budget | None = Field(
        default=None,
        description="What an approval adds to each limit (``modelCalls``, ``tokens``, "
        "``costUsd``, ``toolCalls``, ``wallTime`` in seconds); a limit it leaves out stays.",
    )
    reason: str | None = Field(default=None, max_length=2000)
    approver: str = Field(default="api", min_length=1, max_length=200)


class AnswerBody(RequestBody):
    value: JsonValue = Field(
        description="The answer: any JSON value (``null`` too) that fits the input's schema."
    )
    responder: str = Field(default="api", min_length=1, max_length=200)


class ForkBody(RequestBody):
    at_seq: int = Field(ge=1, le=MAX_SEQ)
    session: str | None = None
