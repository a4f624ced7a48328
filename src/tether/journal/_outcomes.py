"""Effects as records and back: a tool's intent, outcome and result, a step's value, and a
recorded effect as a divergence reports it."""

from __future__ import annotations

from pydantic import JsonValue

from tether._wire import JsonObject
from tether.messages import ToolCall, ToolResult
from tether.records import Payload, Record, StepRecorded, ToolCalled, ToolOutcome

__all__ = (
    "APPROVED_RUN",
    "asked",
    "effect_of",
    "intent_of",
    "outcome_of",
    "result_of",
    "step_value",
)

APPROVED_RUN = "tether.approved_run"
"""The step an approved call that is not idempotent records just before it runs (its value:
the decision's seq): what tells a run cut short from one that never started."""


def result_of(record: Record) -> ToolResult:
    payload = record.payload
    assert isinstance(payload, ToolOutcome)
    return ToolResult(
        call_id=payload.call_id,
        content=payload.content,
        data=payload.data,
        is_error=payload.is_error,
        status=payload.status,
    )


def outcome_of(result: ToolResult) -> ToolOutcome:
    return ToolOutcome(
        call_id=result.call_id,
        content=result.content,
        data=result.data,
        is_error=result.is_error,
        status=result.status,
    )


def step_value(record: Record) -> JsonValue:
    payload = record.payload
    assert isinstance(payload, StepRecorded)
    return payload.value


def intent_of(call: ToolCall) -> ToolCalled:
    return ToolCalled(
        call_id=call.call_id,
        tool=call.name,
        args=call.args,
        idempotency_key=call.idempotency_key,
        mediation=call.mediation,
        idempotent=call.idempotent or None,
    )


def effect_of(record: Record) -> JsonObject:
    """A recorded effect as a divergence reports it: its kind and payload."""
    return {"kind": record.kind, "payload": record.fields.get("payload")}


def asked(got: Payload | JsonObject | None) -> JsonObject | None:
    """What the code asked for, in the shape of :func:`effect_of`."""
    if got is None or isinstance(got, dict):
        return got
    return {"kind": got.KIND, "payload": got.to_json_object()}
