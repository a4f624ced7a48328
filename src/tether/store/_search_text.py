"""The text of a log that session search reads: the messages people and models wrote
(``user_message``, ``steer_received``, and the text of each completed assistant message of
the transcript), split into words the same way on every backend.

A word is a run of letters and digits (an underscore separates words) of at most
``MAX_WORD_LENGTH`` characters, compared in lower case. Every backend stores the words
this module splits (SQLite's FTS5 table re-reads them with its ``unicode61`` tokenizer,
PostgreSQL takes them as lexemes as they are), so that a query matches the same sessions on
each: a session one of whose messages holds every word of the query.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from tether._payloads import AssistantMessageCompleted, SteerReceived, UserMessage
from tether.errors import RecordDecodeError
from tether.records import Record

__all__ = (
    "MAX_QUERY_WORDS",
    "MAX_WORD_LENGTH",
    "SEARCHED_KINDS",
    "message_text",
    "query_words",
    "searchable",
    "words",
)

SEARCHED_KINDS: Final = frozenset(
    {UserMessage.KIND, SteerReceived.KIND, AssistantMessageCompleted.KIND}
)
MAX_QUERY_WORDS: Final = 16
"""Words of a query past this many are ignored."""
MAX_WORD_LENGTH: Final = 200
"""A longer run of letters and digits is no word: neither kept nor searched (PostgreSQL
keeps no lexeme of more than 2047 bytes)."""
_WORD: Final = re.compile(r"[^\W_]+")


def message_text(record: Record) -> str | None:
    """The searchable text of ``record``, or ``None`` when it has none (another kind, an
    empty message, an interrupted or summary completion, a payload that does not decode)."""
    if record.kind not in SEARCHED_KINDS:
        return None
    try:
        payload = record.payload
    except RecordDecodeError:
        return None
    if isinstance(payload, UserMessage | SteerReceived):
        text = payload.body
    elif isinstance(payload, AssistantMessageCompleted):
        if payload.interrupted or payload.purpose is not None:
            return None
        text = payload.message.text
    else:  # pragma: no cover - the kinds above are the only ones searched
        return None
    return text if text.strip() else None


def searchable(records: Iterable[Record]) -> list[tuple[int, str]]:
    """The ``(seq, text)`` of each record of ``records`` that has searchable text."""
    found = []
    for record in records:
        text = message_text(record)
        if text is not None:
            found.append((record.seq, text))
    return found


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, in order."""
    return [word for word in _WORD.findall(text.lower()) if len(word) <= MAX_WORD_LENGTH]


def query_words(query: str | None) -> tuple[str, ...]:
    """The distinct words of a search query (at most ``MAX_QUERY_WORDS``); empty when the
    query has none (then it filters nothing)."""
    if not query:
        return ()
    return tuple(dict.fromkeys(words(query)))[:MAX_QUERY_WORDS]
