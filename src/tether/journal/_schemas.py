"""Checking a person's value against the JSON Schema its request recorded (an approval's
edited arguments, an input's answer): the decision is checked against what the log holds."""

from __future__ import annotations

import logging

import jsonschema
from pydantic import JsonValue

from tether._wire import JsonObject

__all__ = ("schema_error",)

logger = logging.getLogger("tether.journal")


def schema_error(schema: JsonObject, value: JsonValue, what: str) -> tuple[str, str] | None:
    """The first way ``value`` does not fit ``schema`` (its message, and the dotted path of
    the offending value, ``""`` at the top), or ``None`` if it fits. A schema that is not
    valid checks nothing (logged, naming ``what`` it belongs to)."""
    validator = jsonschema.validators.validator_for(schema)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        logger.warning("the schema of %s is not valid (%s): it is not checked", what, exc.message)
        return None
    error = jsonschema.exceptions.best_match(validator(schema).iter_errors(value))
    if error is None:
        return None
    return error.message, ".".join(str(part) for part in error.absolute_path)
