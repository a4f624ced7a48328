"""The base of every wire model: frozen pydantic, camelCase on the wire, no extra fields."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue
from pydantic.alias_generators import to_camel

__all__ = ("JsonObject", "WireModel")

JsonObject = dict[str, JsonValue]


class WireModel(BaseModel):
    """Frozen, strict-shaped model with camelCase names on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
    )

    def to_json_object(self) -> dict[str, Any]:
        """The wire form: camelCase keys, absent optionals omitted."""
        # What model_dump(mode="json", exclude_none=True) calls, without its per-call wrapper:
        # every record drafted and every model input hashed goes through here.
        wire: dict[str, Any] = self.__pydantic_serializer__.to_python(
            self, mode="json", exclude_none=True
        )
        return wire
