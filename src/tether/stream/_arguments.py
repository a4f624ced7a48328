"""Tool-request arguments, which arrive as text, always as a JSON object."""

from __future__ import annotations

import json
from typing import cast

from pydantic import JsonValue

__all__ = ("parse_tool_arguments",)


def parse_tool_arguments(text: str | None) -> dict[str, JsonValue]:
    """Streamed or serialized arguments as an object: empty → ``{}``, bad JSON →
    ``{"raw": text}``, a JSON value that is not an object → ``{"value": v}``.

    Example::

        parse_tool_arguments('{"city": "Oslo"}')   # {"city": "Oslo"}
        parse_tool_arguments('{"city":')           # {"raw": '{"city":'}
    """
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"raw": text}
    if isinstance(value, dict):
        return cast(dict[str, JsonValue], value)
    return {"value": cast(JsonValue, value)}
