"""Tether: durable AI-agent sessions.

Every session is an append-only, hash-chained log in which each model and tool call
is journaled, so a session survives ``kill -9``, replays offline, forks, and parks
for human approval.

Example::

    import tether
    from tether.store import open_store

    store = await open_store("sqlite:///./tether-data")
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether._signing import verify_signature
    from tether.engine import AgentDefinition, AgentSpec, App, Memory, Runtime
    from tether.records import Record, RecordDraft
    from tether.store import SessionKey, Store, open_store

    __version__: str

# Loaded on first use: every ``tether`` command starts with ``import tether``, and a client
# command (``tether send``, ``tether --help``) must not pay for the engine, the stores and
# pydantic, nor ``importlib.metadata``.
_LAZY = {
    "AgentDefinition": "tether.engine",
    "AgentSpec": "tether.engine",
    "App": "tether.engine",
    "Memory": "tether.engine",
    "Runtime": "tether.engine",
    "Record": "tether.records",
    "RecordDraft": "tether.records",
    "SessionKey": "tether.store",
    "Store": "tether.store",
    "open_store": "tether.store",
    "verify_signature": "tether._signing",
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tether")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.0.0"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = (
    "AgentDefinition",
    "AgentSpec",
    "App",
    "Memory",
    "Record",
    "RecordDraft",
    "Runtime",
    "SessionKey",
    "Store",
    "__version__",
    "open_store",
    "verify_signature",
)
