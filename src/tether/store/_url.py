"""Opening a store from a URL: ``memory://``, ``sqlite:///path``, ``postgresql://...``."""

from __future__ import annotations

from typing import cast
from urllib.parse import parse_qs

from tether._extras import install_hint
from tether._urls import redact_url
from tether.store._memory import MemoryStore
from tether.store._protocol import Store
from tether.store._sqlite import SqliteStore
from tether.store._sqlite_schema import Synchronous

__all__ = ("DEFAULT_STORE_URL", "open_store")

DEFAULT_STORE_URL = "sqlite:///./tether-data"
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


async def open_store(url: str = DEFAULT_STORE_URL) -> Store:
    """Open the store a URL names.

    - ``memory://``: the in-memory reference store;
    - ``sqlite:///relative/path`` or ``sqlite:////absolute/path`` (the SQLAlchemy convention);
      a directory means ``<dir>/tether.db``; options as query parameters:
      ``?synchronous=NORMAL&busy_timeout=5&inline_commits=false``;
    - ``postgresql://user@host:port/database`` (also ``postgres://``; the ``postgres`` extra):
      options ``schema``, ``pool_min``, ``pool_max``, ``poll_interval``, the rest for libpq.

    Example::

        async with await open_store("sqlite:///./tether-data") as store:
            print(await store.list_runnable())
    """
    scheme, _, rest = url.partition("://")
    shown = redact_url(url)  # error messages get logged: never with a password
    if scheme == "memory":
        return MemoryStore()
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise ValueError(f"a sqlite URL looks like sqlite:///path/to/dir, not {shown!r}")
        path, _, query = rest[1:].partition("?")
        options = {key: values[-1] for key, values in parse_qs(query).items()}
        unknown = set(options) - {"synchronous", "busy_timeout", "inline_commits"}
        if unknown:
            raise ValueError(f"unknown sqlite option(s): {', '.join(sorted(unknown))}")
        synchronous = options.get("synchronous", "FULL").upper()
        inline = options.get("inline_commits", "true").lower()
        if inline not in _BOOLEANS:
            raise ValueError(f"inline_commits must be true or false, not {inline!r}")
        return await SqliteStore.open(
            path,
            synchronous=cast(Synchronous, synchronous),
            busy_timeout=float(options.get("busy_timeout", 5.0)),
            inline_commits=_BOOLEANS[inline],
        )
    if scheme in ("postgresql", "postgres"):
        try:
            from tether.store.postgres import PostgresStore
        except ImportError as exc:  # the extra is not installed
            raise ValueError(f"{shown!r} {install_hint('postgres')}: {exc}") from exc
        return await PostgresStore.open(url)
    raise ValueError(
        f"unsupported store URL {shown!r}: use memory://, sqlite:///path or postgresql://..."
    )
