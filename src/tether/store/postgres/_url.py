"""A ``postgresql://`` store URL split into libpq's part and Tether's own query options."""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ("OPTIONS", "split_store_url")

OPTIONS: Final = frozenset({"schema", "pool_min", "pool_max", "poll_interval"})
"""The query options a store URL may carry for Tether (the rest go to libpq)."""


def split_store_url(url: str) -> tuple[str, dict[str, str]]:
    """A store URL as libpq's connection URL and Tether's own query options (``schema``...).

    Example::

        conninfo, options = split_store_url("postgresql://db/tether?schema=ops")
        assert options == {"schema": "ops"}
    """
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in OPTIONS:
            ours[key] = value
        else:
            theirs.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(theirs))), ours
