"""Input gates as the log records them: a question for a person, and its answer.

An input is a call of ``Mediation.INPUT``: its ``tool_called`` intent and its
``input_requested`` record commit together; ``Journal.answer`` records ``input_answered``
(and wakes the submission); the resumed execution turns the answer into the call's
``tool_outcome``, which is what replay serves from then on.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson
from pydantic import JsonValue

from tether._canonical import canonical_json
from tether.errors import InputConflict, InputNotFound, InvalidAnswer
from tether.journal._schemas import schema_error
from tether.messages import ToolCall, ToolOutcomeStatus, ToolResult
from tether.records import Actor, InputAnswered, InputRequested, Record

__all__ = ("answer_result", "check_answer", "find_answer", "input_prompt")


def input_prompt(call: ToolCall) -> str:
    """The question a model-offered input tool asks: its ``question`` or ``prompt`` argument
    when it has one, else the call itself, as a person can read it."""
    for name in ("question", "prompt"):
        value = call.args.get(name)
        if isinstance(value, str) and value:
            return value
    return f"{call.name}({orjson.dumps(call.args).decode()})"


def answer_result(call_id: str, value: JsonValue) -> ToolResult:
    """The call's result an answer makes: the text itself, or the value's JSON, as content,
    and the value as data."""
    content = value if isinstance(value, str) else orjson.dumps(value).decode()
    return ToolResult(call_id=call_id, content=content, data=value, status=ToolOutcomeStatus.OK)


def find_answer(
    records: Sequence[Record],
    input_id: str,
    *,
    value: JsonValue,
    responder: str,
    by: Actor | None = None,
) -> tuple[Record, Record | None]:
    """The request an input id names, and its answer if an identical one exists.

    Raises ``InputNotFound`` for an unknown id and ``InputConflict`` if the input was
    already answered differently (answers are final; repeating one is idempotent).
    """
    request = next(
        (
            record
            for record in records
            if isinstance(record.payload, InputRequested) and record.payload.input_id == input_id
        ),
        None,
    )
    if request is None:
        raise InputNotFound(input_id)
    for record in records:
        payload = record.payload if record.kind == InputAnswered.KIND else None
        if isinstance(payload, InputAnswered) and payload.input_id == input_id:
            if (
                payload.responder != responder
                or payload.by != by
                or canonical_json(payload.value) != canonical_json(value)
            ):
                raise InputConflict(
                    f"input {input_id} was already answered by {payload.responder}; "
                    "answers are final"
                )
            return request, record
    return request, None


def check_answer(requested: InputRequested, value: JsonValue) -> None:
    """The answer must fit the schema the request recorded (none takes any JSON value)."""
    schema = requested.answer_schema
    found = None if schema is None else schema_error(schema, value, f"input {requested.input_id}")
    if found is not None:
        message, path = found
        raise InvalidAnswer(
            f"the answer to input {requested.input_id} does not fit its schema: {message}",
            field=f"value.{path}" if path else "value",
        )
