"""What a dispatch carries in: a user message, a signal, a steer or a compaction request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import jsonschema
from pydantic import Field, ValidationError, model_validator

from tether._inbound import InboundKind, SignalInfo
from tether._payloads import Actor, AttachmentRef
from tether._wire import JsonObject, WireModel
from tether.engine._budget import Budget
from tether.errors import InvalidDispatch
from tether.records import Signal, SteerReceived, UserMessage

__all__ = (
    "Inbound",
    "InboundKind",
    "SignalInfo",
    "parse_inbound",
)


class Inbound(WireModel):
    """One admitted unit of input, stored verbatim on the submission.

    Example::

        Inbound(kind="user", body="What is the weather?")
        Inbound(kind="signal", body='{"order": 7}', signal=SignalInfo(type="order.paid"))
        Inbound(kind="user", body="Rate it", result_schema={"type": "object"}, result_retries=1)
    """

    kind: InboundKind = "user"
    body: str = ""
    signal: SignalInfo | None = None
    attachments: tuple[AttachmentRef, ...] | None = None
    result_schema: JsonObject | None = None
    result_retries: int | None = Field(default=None, ge=0, le=10)
    budget: Budget | None = None
    """This submission's own limits (docs/budgets.md): each it sets overrides the agent's and
    the application's. Stored with the input, so every attempt enforces the same budget."""
    by: Actor | None = None
    """Who sent it, as the server verified them: recorded on the message, and what a tool
    sees as ``ctx.identity``. The caller's own application sets it, never a client's body."""

    @model_validator(mode="after")
    def _check(self) -> Inbound:
        if self.kind == "signal" and self.signal is None:
            raise ValueError("a signal needs signal.type")
        if self.kind != "signal" and self.signal is not None:
            raise ValueError(f"a {self.kind} message carries no signal")
        if self.kind != "compact" and not self.body:
            raise ValueError("body is required")
        if self.kind in ("steer", "follow_up", "compact") and self.result_schema is not None:
            raise ValueError(f"a {self.kind} takes no result schema")
        if self.kind in ("steer", "follow_up", "compact") and self.budget is not None:
            raise ValueError(f"a {self.kind} takes no budget: it runs within its host's")
        if self.result_schema is not None:
            try:
                jsonschema.validators.validator_for(self.result_schema).check_schema(
                    self.result_schema
                )
            except jsonschema.SchemaError as exc:
                raise ValueError(
                    f"result_schema is not a valid JSON Schema: {exc.message}"
                ) from None
        return self

    def input_payload(self) -> UserMessage | Signal:
        """The record that opens this submission's execution."""
        if self.kind == "signal":
            assert self.signal is not None
            return Signal(
                type=self.signal.type,
                body=self.body,
                sender=self.signal.sender,
                tag=self.signal.tag,
                by=self.by,
            )
        return UserMessage(body=self.body, attachments=self.attachments, by=self.by)

    def steer_payload(self, submission_id: str) -> SteerReceived:
        mode: Literal["steer", "follow_up"] = "follow_up" if self.kind == "follow_up" else "steer"
        return SteerReceived(
            body=self.body,
            mode=mode,
            attachments=self.attachments,
            source_submission_id=submission_id,
            by=self.by,
        )


def parse_inbound(message: Inbound | str | Mapping[str, Any]) -> Inbound:
    """Validate a message (a string is a user message); ``InvalidDispatch`` names the field."""
    if isinstance(message, Inbound):
        return message
    if isinstance(message, str):
        message = {"kind": "user", "body": message}
    try:
        return Inbound.model_validate(message)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or None
        text = str(error["msg"]).removeprefix("Value error, ")
        raise InvalidDispatch(text, field=field) from None
