"""Structured results: a reply checked against the dispatch's JSON Schema, and the
corrective prompt a non-conforming reply earns while retries are left."""

from __future__ import annotations

import json
import re
from typing import Final

import jsonschema
from pydantic import JsonValue

from tether.engine._settle import RESULT_SCHEMA_INVALID, failed, succeeded
from tether.records import SubmissionSettled

__all__ = ("RESULT_CORRECTION", "correction", "judge", "parse_result")

_FENCED_JSON = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def judge(
    output: JsonValue,
    schema: dict[str, JsonValue] | None,
    *,
    corrections: int,
    retries: int,
) -> tuple[SubmissionSettled | None, str]:
    """The settlement ``output`` earns, or ``None`` and the problem when it does not conform
    yet and fewer than ``retries`` corrective turns were spent (``corrections``)."""
    if schema is None:
        return succeeded(output), ""
    parsed, problem = parse_result(output, schema)
    if problem is None:
        return succeeded(parsed), ""
    if corrections >= retries:
        return failed(RESULT_SCHEMA_INVALID, problem), problem
    return None, problem


RESULT_CORRECTION: Final = "Your reply did not match the required JSON Schema"
"""How the message a model is told after a reply that missed a submission's result schema
begins (what follows: the problem, the schema, and the request to answer again): a keyless
model, or a test, can tell the corrective turn by it.

Example::

    Rule(lambda request: request.messages[-1].text.startswith(RESULT_CORRECTION), fixed)
"""


def correction(problem: str, schema: dict[str, JsonValue] | None) -> str:
    """What the model is told after a reply that missed the schema."""
    return (
        f"{RESULT_CORRECTION}: {problem}\n"
        f"Schema: {json.dumps(schema)}\n"
        "Reply with ONLY a JSON document that conforms to the schema."
    )


def parse_result(output: JsonValue, schema: dict[str, JsonValue]) -> tuple[JsonValue, str | None]:
    """Parse a reply (the whole text, or its first fenced block) and check it against a schema:
    the value and ``None``, or ``None`` and what is wrong with it."""
    value: JsonValue = output
    if isinstance(output, str):
        text = output.strip()
        match = _FENCED_JSON.search(text)
        for candidate in (text, match.group(1).strip() if match else None):
            if candidate is None:
                continue
            try:
                value = json.loads(candidate)
                break
            except ValueError:
                value = None
        else:
            return None, "the reply is not JSON"
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        return None, exc.message
    return value, None
