"""Records a lean view knows the place of but has not read.

A view that takes a long log in from its snapshot to start the next execution reads only the
records after the snapshot and the latest execution's own (see ``LogView.refresh``). Every
older record stands in the view as an :class:`Unread` placeholder: its seq, and for an
execution's start its submission id, are known from the snapshot, which is all that the next
execution and the next snapshot need of it. Anything else raises, so a reader that needs the
records themselves fails loudly unless it brought the view up to date in full first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn, cast

from tether.records import Record

__all__ = ("GAP", "gap_prefix", "is_gap", "is_unread", "unread_prefix")


class Unread:
    __slots__ = ("seq", "submission_id")

    def __init__(self, seq: int, submission_id: str | None) -> None:
        self.seq = seq
        self.submission_id = submission_id

    def __getattr__(self, name: str) -> NoReturn:
        raise LookupError(
            f"record {self.seq} has not been read: refresh the view in full before using it"
        )

    def __repr__(self) -> str:
        return f"Unread(seq={self.seq})"


def unread_prefix(count: int, submission_ids: Mapping[int, str | None]) -> list[Record]:
    """Placeholders for records 1..``count``, typed as the records they stand for; an
    execution's start (by its log index in ``submission_ids``) carries its submission id."""
    submission_of = submission_ids.get
    return cast(list[Record], [Unread(index + 1, submission_of(index)) for index in range(count)])


def is_unread(record: object) -> bool:
    return type(record) is Unread


class _Gap:
    """A record retention removed: it stands before a truncated log's ``log_truncated``
    record, which carries all that reading it would have given. It belongs to no execution
    and no submission, and stands for no message; anything else about it raises."""

    __slots__ = ()
    kind = ""
    execution_id = None
    submission_id = None

    def __getattr__(self, name: str) -> NoReturn:
        raise LookupError("this record was truncated away by retention (see log_truncated)")

    def __repr__(self) -> str:
        return "GAP"


GAP: Record = cast(Record, _Gap())
"""The one placeholder of every record retention removed: a truncated log of a million
records costs a view a pointer per removed record, not an object."""


def gap_prefix(count: int) -> list[Record]:
    """Placeholders for the ``count`` records before a truncated log's anchor."""
    return [GAP] * count


def is_gap(record: object) -> bool:
    return record is GAP
