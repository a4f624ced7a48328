"""The log's own objects as a response holds them: a stored record (:data:`WireRecord`,
documented as :class:`RecordEnvelope`), a message, a decision, an actor, each written by its
own serializer.

A record is decoded (by :mod:`tether.records`, loaded then) only when a response holding one
is read: a client that never reads one never loads the log's record types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

from pydantic import Field, JsonValue, PlainSerializer, PlainValidator

from tether._payloads import Actor, ApprovalDecided
from tether.messages import Message
from tether.wire._base import TIMESTAMP, WireResponse, optional

if TYPE_CHECKING:
    from tether.records import Record

__all__ = (
    "DECIDED_BY",
    "RecordEnvelope",
    "WireActor",
    "WireDecision",
    "WireMessage",
    "WireRecord",
)


def _a_record(value: object) -> Record:
    from tether.records import Record, decode_record  # only once a record is read

    if isinstance(value, Record):
        return value
    if isinstance(value, Mapping):  # read back from the wire (tether.client): decoded once
        return decode_record(value)
    raise ValueError(f"a Record, not {type(value).__name__}")


def _record_wire(record: Record) -> Any:
    return record.to_wire()


class RecordEnvelope(WireResponse):
    """A record of the log as it is stored and sent (SSE ``data`` too): its envelope, its
    kind's payload, and its place in the hash chain."""

    seq: int
    id: str
    kind: str
    conversation_id: str
    session: str
    submission_id: str | None = optional()
    attempt_id: str | None = optional()
    execution_id: str | None = optional()
    turn: int | None = optional()
    time: str = Field(**TIMESTAMP)
    payload: dict[str, JsonValue]
    prev_hash: str
    hash: str


if TYPE_CHECKING:
    WireRecord: TypeAlias = Record
else:
    WireRecord = Annotated[
        Any,  # a Record: its type is loaded only once one is read (_a_record)
        # A record is checked once, when it is written; a response holds it as it is. A
        # client reading the response decodes it from its wire form.
        PlainValidator(_a_record, json_schema_input_type=RecordEnvelope),
        PlainSerializer(_record_wire),
    ]
"""A stored record in a response: documented as :class:`RecordEnvelope`, sent as stored."""


WireMessage = Annotated[Message, PlainSerializer(Message.to_json_object)]
"""A message in a response, in its wire form."""


WireDecision = Annotated[ApprovalDecided, PlainSerializer(ApprovalDecided.to_json_object)]


WireActor = Annotated[Actor, PlainSerializer(Actor.to_json_object)]
"""Who did something, as the server verified them: ``{subject, tenant?, display?}``."""


DECIDED_BY: dict[str, Any] = {
    "description": "Who decided, as the server verified them (their subject and tenant, and the "
    "name shown): absent when no one authenticated did (a server without auth, a library call)."
}
