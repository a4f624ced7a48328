"""``--log-format json``: each log record as one JSON object on one line.

The fields are ``ts`` (UTC, ISO 8601, milliseconds), ``level``, ``logger`` and ``message``,
then what the record says it is about, from the ``extra=`` fields it was logged with (never
parsed out of its message): ``submission_id``, ``conversation_id``, ``session``
(``agent/instance/session``), ``attempt_id``, ``trace_id`` and ``span_id`` first, then any
other field the caller gave (``approval_id``, ``subject``...), then ``exc_info`` (the
traceback, as the text format prints it). A field without a value is left out. uvicorn's
access lines add ``client``, ``method``, ``path`` and ``status``.

A formatter of our own and not python-json-logger: the fields are few and fixed, the standard
``json`` module writes them, and ``tether serve`` (a core command) takes no dependency for it.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

__all__ = ("IDS", "JsonFormatter")

IDS = ("submission_id", "conversation_id", "session", "attempt_id", "trace_id", "span_id")
"""The ids a record about a run carries, in the order they are written."""

# What every LogRecord has (and what logging sets while formatting): never an ``extra`` field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's coloured copy of the message
    "taskName",
}
_ACCESS = ("client", "method", "path", "http_version", "status")


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON (see the module's docstring for the fields).

    Example::

        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logging.getLogger("tether").addHandler(handler)
    """

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = {
            name: value
            for name, value in vars(record).items()
            if name not in _STANDARD and not name.startswith("_") and value is not None
        }
        for name in IDS:
            if name in extra:
                fields[name] = _plain(extra.pop(name))
        fields.update((name, _plain(value)) for name, value in extra.items())
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            if len(record.args) == len(_ACCESS):
                fields.update(zip(_ACCESS, record.args, strict=True))
                fields.pop("http_version")
        if record.exc_info:
            fields["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            fields["exc_info"] = record.exc_text
        if record.stack_info:
            fields["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(fields, ensure_ascii=False, default=str)


def _plain(value: object) -> object:
    """A field's value as JSON has it: numbers, strings, booleans, lists and objects stay;
    anything else (a session key, a datetime) is written as its ``str``."""
    if isinstance(value, str | int | float | bool | list | dict):
        return value
    return str(value)
