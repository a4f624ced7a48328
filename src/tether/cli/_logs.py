"""What ``tether serve`` and ``tether worker`` log: Tether's own lines at INFO, uvicorn quiet.

``TETHER_LOG_LEVEL`` (default ``info``) sets the level of the ``tether`` loggers: takeovers,
approvals and failed settlements are INFO lines with their ids. uvicorn stays at WARNING, so
its access log (a line per request) is off, unless the level is ``debug``.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ("show_tether_logs", "uvicorn_log_level")

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _level() -> str:
    name = os.environ.get("TETHER_LOG_LEVEL", "info").strip().upper() or "INFO"
    return name if isinstance(logging.getLevelName(name), int) else "INFO"


def show_tether_logs() -> None:
    """Log the ``tether`` loggers at ``TETHER_LOG_LEVEL`` to stderr. Call it after the
    application is loaded: if it configured logging itself (a root handler), its handlers
    are used and only the level is set here."""
    tether = logging.getLogger("tether")
    tether.setLevel(_level())
    if logging.getLogger().handlers or tether.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    tether.addHandler(handler)


def uvicorn_log_level() -> str:
    """uvicorn's level: ``warning`` (no access log) unless ``TETHER_LOG_LEVEL`` is ``debug``
    or quieter than ``warning``."""
    level = _level()
    return (
        level.lower()
        if level == "DEBUG" or logging.getLevelName(level) > logging.WARNING
        else "warning"
    )
