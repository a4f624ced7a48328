"""What ``tether serve`` and ``tether worker`` log, and how: ``--log-format``, ``--log-level``.

Tether's loggers (``tether.*``) log at ``--log-level`` (``TETHER_LOG_LEVEL``, default
``info``): takeovers, approvals and failed settlements are INFO lines with their ids, and a
successful settlement is a DEBUG line. uvicorn stays at WARNING, so its access log (a line per
request) is off, unless the level is ``debug``. Everything goes to stderr through one handler
on the root logger, uvicorn's lines too, in the format ``--log-format`` (``TETHER_LOG_FORMAT``)
names: ``text``, a line of ``time level logger: message``, or ``json``, one JSON object a line
(:class:`~tether.cli._jsonlog.JsonFormatter`). With tracing on, a record also carries the
trace it belongs to (``trace_id``, ``span_id``: :class:`tether.otel.TraceLogFilter`).
"""

from __future__ import annotations

import enum
import logging
import sys

import typer

from tether.cli._jsonlog import JsonFormatter

__all__ = (
    "LOG_FORMAT",
    "LOG_LEVEL",
    "LogFormat",
    "LogLevel",
    "show_tether_logs",
    "uvicorn_log_level",
)

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


class LogLevel(enum.StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


LOG_FORMAT = typer.Option(
    LogFormat.TEXT,
    "--log-format",
    case_sensitive=False,
    help="text: a line of 'time level logger: message'; json: one JSON object a line, "
    "with the submission, conversation, session, attempt and trace ids of what it is about.",
)
LOG_LEVEL = typer.Option(
    LogLevel.INFO,
    "--log-level",
    case_sensitive=False,
    help="The least level logged (debug adds a line per settled run and uvicorn's access log).",
)


def show_tether_logs(
    log_format: LogFormat = LogFormat.TEXT,
    log_level: LogLevel = LogLevel.INFO,
    *,
    tracing: bool = False,
) -> None:
    """Log the ``tether`` loggers at ``log_level`` to stderr, in ``log_format``, and whatever
    else reaches the root logger (uvicorn's lines, warnings) the same way; with ``tracing``,
    each record with its trace and span ids. Call it after the application is loaded: if it
    configured logging itself (a root handler, or one on ``tether``), its handlers are used
    and only the level is set here."""
    tether = logging.getLogger("tether")
    tether.setLevel(log_level.upper())
    root = logging.getLogger()
    if root.handlers or tether.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    json_lines = log_format is LogFormat.JSON
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(_FORMAT))
    if tracing:
        try:
            from tether.otel import TraceLogFilter
        except ImportError:  # said by --otlp-endpoint's own check, as one line
            pass
        else:
            handler.addFilter(TraceLogFilter())
    root.addHandler(handler)
    logging.captureWarnings(True)  # a warning is a line in the format too, not a bare print


def uvicorn_log_level(log_level: LogLevel = LogLevel.INFO) -> str:
    """uvicorn's level: ``warning`` (no access log) unless ``log_level`` is ``debug`` or
    quieter than ``warning``."""
    return log_level.value if log_level in (LogLevel.DEBUG, LogLevel.ERROR) else "warning"
