"""Session metadata: a small JSON object of scalars a session carries beside its log (set by
a dispatch, changed by a merge patch), its bounds, and the text form a filter compares.

A session's metadata is a flat object: at most ``MAX_KEYS`` keys of 1 to ``MAX_KEY_LENGTH``
characters, each a string, a finite number or a boolean, at most ``MAX_BYTES`` once
serialized. A change is an RFC 7396 merge patch: a key set to ``null`` is removed, any other
value replaces the key's. A filter ``metadata.<key>=<text>`` matches a session whose value
for the key has that text form: a string itself, a boolean ``true``/``false``, a number its
JSON (``3``, ``2.5``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from tether.errors import InvalidMetadata

__all__ = (
    "METADATA_LIMITS",
    "MetadataLimits",
    "MetadataValue",
    "check_metadata_filter",
    "merge_metadata",
    "metadata_json",
    "metadata_text",
    "parse_metadata",
)

MetadataValue = str | int | float | bool
"""What a metadata key may hold."""


@dataclass(frozen=True, slots=True)
class MetadataLimits:
    """The bounds of a session's metadata, and of a listing's metadata filters."""

    max_keys: int = 64
    max_key_length: int = 64
    max_bytes: int = 8192
    max_filters: int = 8
    max_filter_value_length: int = 1024


METADATA_LIMITS: Final = MetadataLimits()


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= METADATA_LIMITS.max_key_length:
        raise InvalidMetadata(
            f"a key is a string of 1..{METADATA_LIMITS.max_key_length} characters, got {key!r:.80}"
        )
    if "\x00" in key:
        raise InvalidMetadata("a key holds no NUL character")
    return key


def _check_value(key: str, value: object) -> MetadataValue:
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidMetadata("a value holds no NUL character", field=f"metadata.{key}")
        return value
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMetadata("a number is finite", field=f"metadata.{key}")
        return value
    raise InvalidMetadata(
        f"a value is a string, a number or a boolean, got {type(value).__name__}",
        field=f"metadata.{key}",
    )


def metadata_json(metadata: Mapping[str, MetadataValue]) -> str:
    """The canonical serialization of ``metadata`` (keys sorted, compact): what a store
    keeps, and what the size bound measures."""
    return json.dumps(dict(metadata), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _check_whole(metadata: dict[str, MetadataValue]) -> dict[str, MetadataValue]:
    if len(metadata) > METADATA_LIMITS.max_keys:
        raise InvalidMetadata(f"at most {METADATA_LIMITS.max_keys} keys, got {len(metadata)}")
    size = len(metadata_json(metadata).encode())
    if size > METADATA_LIMITS.max_bytes:
        raise InvalidMetadata(f"at most {METADATA_LIMITS.max_bytes} bytes serialized, got {size}")
    return dict(sorted(metadata.items()))


def parse_metadata(value: object) -> dict[str, MetadataValue]:
    """``value`` checked as a whole metadata object (no ``null`` values), keys sorted;
    ``InvalidMetadata`` otherwise.

    Example::

        parse_metadata({"customer": "acme", "tier": 2})
    """
    if not isinstance(value, Mapping):
        raise InvalidMetadata(f"a JSON object, got {type(value).__name__}")
    return _check_whole({_check_key(k): _check_value(k, v) for k, v in value.items()})


def merge_metadata(
    current: Mapping[str, MetadataValue], patch: Mapping[str, Any]
) -> dict[str, MetadataValue]:
    """``current`` with the RFC 7396 merge ``patch`` applied (``None`` removes a key), checked
    against the bounds; ``InvalidMetadata`` for a patch that is no object of scalars and
    nulls, or a result out of bounds.

    Example::

        merge_metadata({"a": 1, "b": "x"}, {"a": None, "c": True})  # {"b": "x", "c": True}
    """
    if not isinstance(patch, Mapping):
        raise InvalidMetadata(f"a merge patch is a JSON object, got {type(patch).__name__}")
    merged = dict(current)
    for key, value in patch.items():
        _check_key(key)
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _check_value(key, value)
    return _check_whole(merged)


def metadata_text(value: MetadataValue) -> str:
    """The text a filter compares a value with: a string itself, else its JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def check_metadata_filter(filters: Mapping[str, str] | None) -> dict[str, str]:
    """A listing's metadata filters checked (keys as metadata keys, at most ``max_filters``,
    each value a string of bounded length); ``InvalidMetadata`` otherwise."""
    if not filters:
        return {}
    if len(filters) > METADATA_LIMITS.max_filters:
        raise InvalidMetadata(
            f"at most {METADATA_LIMITS.max_filters} metadata filters, got {len(filters)}"
        )
    checked: dict[str, str] = {}
    for key, value in filters.items():
        _check_key(key)
        if not isinstance(value, str) or len(value) > METADATA_LIMITS.max_filter_value_length:
            raise InvalidMetadata(
                f"a filter's value is a string of at most "
                f"{METADATA_LIMITS.max_filter_value_length} characters",
                field=f"metadata.{key}",
            )
        if "\x00" in value:
            raise InvalidMetadata("a value holds no NUL character", field=f"metadata.{key}")
        checked[key] = value
    return checked
