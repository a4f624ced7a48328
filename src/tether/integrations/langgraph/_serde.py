"""How a checkpoint's values go into a log record: JSON as it is, anything else through
LangGraph's serializer with its pickle fallback off, never pickle."""

from __future__ import annotations

import base64
import math
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import JsonValue

from tether.integrations.langgraph._errors import NotJournaled

__all__ = ("CheckpointSerde", "json_only_serde")

_PICKLE = "pickle"


def json_only_serde(serde: SerializerProtocol | None) -> SerializerProtocol:
    """``serde``, or LangGraph's own without pickle; a serializer that may pickle is refused."""
    if serde is None:
        return JsonPlusSerializer(pickle_fallback=False)
    if getattr(serde, "pickle_fallback", False):
        raise ValueError(
            "the serializer falls back to pickle, which Tether never stores: pass "
            "JsonPlusSerializer(pickle_fallback=False), or no serde"
        )
    return serde


class CheckpointSerde:
    """Encodes one value as the JSON a record holds, and back.

    A value that is JSON already (``None``, booleans, numbers, strings, lists and objects of
    them) is kept as ``{"json": value}``, readable in the log; anything else (a LangChain
    message, a ``Send``, an ``Interrupt``, bytes) as ``{"serde": type, "data": base64}`` of
    the serializer's typed bytes.
    """

    def __init__(self, serde: SerializerProtocol) -> None:
        self.serde = serde

    def dump(self, value: Any) -> JsonValue:
        if _is_json(value):
            return {"json": value}
        try:
            kind, data = self.serde.dumps_typed(value)
        except Exception as exc:  # the serializer's own error, whatever its library
            raise NotJournaled(
                f"a checkpoint value of type {type(value).__name__} cannot be serialized "
                f"without pickle ({exc}): keep JSON, LangChain messages, pydantic models or "
                "dataclasses in the graph's state"
            ) from exc
        if kind == _PICKLE:
            raise NotJournaled(
                f"a checkpoint value of type {type(value).__name__} could only be pickled, "
                "which Tether never stores: keep JSON, LangChain messages or pydantic models "
                "in the graph's state"
            )
        return {"serde": kind, "data": base64.b64encode(data).decode("ascii")}

    def load(self, stored: JsonValue) -> Any:
        assert isinstance(stored, dict), stored
        if "json" in stored:
            return stored["json"]
        kind, data = stored["serde"], stored["data"]
        assert isinstance(kind, str) and isinstance(data, str), stored
        if kind == _PICKLE:
            raise NotJournaled("a checkpoint record holds a pickle, which Tether never loads")
        return self.serde.loads_typed((kind, base64.b64decode(data)))


def _is_json(value: Any) -> bool:
    """Whether ``value`` comes back from JSON as itself (no tuple, no non-string key)."""
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(_is_json(item) for item in value)
    if type(value) is dict:
        return all(isinstance(key, str) and _is_json(item) for key, item in value.items())
    return False
