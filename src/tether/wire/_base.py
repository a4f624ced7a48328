"""The bases of the HTTP API's wire models: :class:`RequestBody` (what a route takes) and
:class:`WireResponse` (what it answers), camelCase on the wire, and the helpers their fields
share (:func:`optional`, :data:`TIMESTAMP`, :func:`title`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = ("TIMESTAMP", "RequestBody", "WireResponse", "optional", "title")


def title(name: str, _: object) -> str:
    """A field's title in the schema: "Submission id", not pydantic's "Submissionid"."""
    return name.replace("_", " ").capitalize()


class RequestBody(BaseModel):
    """A JSON request body: camelCase on the wire (snake_case accepted), no unknown fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        field_title_generator=title,
    )


def _absent(value: object) -> bool:
    return value is None


def optional(**schema: Any) -> Any:
    """An optional field, omitted from the wire when it holds None."""
    return Field(default=None, exclude_if=_absent, **schema)


TIMESTAMP: dict[str, Any] = {"json_schema_extra": {"format": "date-time"}}
"""Times are written as Python's ``isoformat`` writes them (``+00:00``), so they are held as
the strings sent; the schema says what they are."""


class WireResponse(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        field_title_generator=title,
    )

    def to_json(self) -> bytes:
        """The body on the wire: what FastAPI writes for a route that returns the model."""
        return self.__pydantic_serializer__.to_json(self)
