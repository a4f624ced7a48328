"""Where a stream stands, as its event ids say it: the plain ones (``<seq>``, or in the
stream view ``<seq>:<n>``) and those of a stream with its children (``?children=true``),
``<position>;<path>=<position>...``: see ``_family``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tether.http._errors import ApiError
from tether.store import MAX_SEQ

__all__ = (
    "FamilyCursor",
    "Position",
    "View",
    "family_cursor",
    "parse_family_id",
    "resume_point",
)

View = Literal["records", "stream", "ag-ui", "ai-sdk"]
"""What a stream sends: records, canonical stream events, or those in a protocol (AG-UI,
the AI SDK's UI message stream); all but records have ids ``<seq>:<n>``."""
Position = tuple[int, int]
"""``(seq, n)``: record ``seq`` read, its first ``n + 1`` events sent (``n`` from -1)."""

_PATH = re.compile(r"[0-9]{1,19}(\.[0-9]{1,19}){0,15}")
_SEQ = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() takes "¹" too
_INDEX = re.compile(r"-1|[0-9]{1,19}")


@dataclass(frozen=True)
class FamilyCursor:
    """A merged stream's position, as its ``Last-Event-ID`` says it."""

    root: Position
    children: dict[str, Position]


def _seq(text: str, least: int) -> int:
    if not _SEQ.fullmatch(text) or not least <= int(text) <= MAX_SEQ:
        raise ValueError(text)
    return int(text)


def _position(text: str, view: View, least: int) -> Position:
    if view == "records":
        return _seq(text, least), 0
    seq, colon, index = text.partition(":")
    if not colon or not _INDEX.fullmatch(index) or int(index) > MAX_SEQ:
        raise ValueError(text)
    return _seq(seq, max(least, 1)), int(index)


def parse_family_id(text: str, view: View) -> FamilyCursor:
    """The position an event id of a merged stream names (``ValueError`` if it names none)."""
    root, *entries = text.strip().split(";")
    children: dict[str, Position] = {}
    for entry in entries:
        path, equals, position = entry.partition("=")
        if not equals or not _PATH.fullmatch(path) or path in children:
            raise ValueError(entry)
        children[path] = _position(position, view, 1)
    return FamilyCursor(_position(root, view, 0), children)


def _number(text: str) -> int | None:
    """A record position written in ASCII digits, within what a store can hold."""
    if not _SEQ.fullmatch(text):
        return None
    value = int(text)
    return value if value <= MAX_SEQ else None


def resume_point(after: int, last_event_id: str | None, view: View) -> tuple[int, int]:
    """Where a stream starts: (records to skip, events of the next record already sent).

    ``Last-Event-ID`` is a seq (records view) or ``<seq>:<n>`` (stream view: the n-th event
    of record seq, so the record is projected again and its first n + 1 events dropped).
    The later of it and ``?after`` wins.
    """
    if last_event_id is None:
        return after, 0
    text, colon, index = last_event_id.strip().partition(":")
    seq, n = _number(text), _number(index)
    if view == "records" and not colon and seq is not None:
        return max(after, seq), 0
    if view != "records" and colon and seq is not None and n is not None and seq > 0:
        return (seq - 1, n + 1) if seq > after else (after, 0)
    shape = "a record seq" if view == "records" else "<seq>:<n> as sent"
    raise ApiError(400, "invalid_last_event_id", f"Last-Event-ID must be {shape}")


def family_cursor(last_event_id: str | None, view: View) -> FamilyCursor | None:
    """A merged stream's ``Last-Event-ID`` (``?children=true``): its sources' positions."""
    if last_event_id is None:
        return None
    try:
        return parse_family_id(last_event_id, view)
    except ValueError:
        shape = "<seq>" if view == "records" else "<seq>:<n>"
        raise ApiError(
            400,
            "invalid_last_event_id",
            f"Last-Event-ID must be an event id as sent: {shape}, then ;<path>={shape} "
            "for each open child",
        ) from None
