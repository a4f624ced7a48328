"""Tether: durable AI-agent sessions.

Every session is an append-only, hash-chained log in which each model and tool call
is journaled, so a session survives ``kill -9``, replays offline, forks, and parks
for human approval.

Example::

    import tether
    from tether.store import open_store

    store = await open_store("sqlite:///./tether-data")
"""

from importlib.metadata import PackageNotFoundError, version

from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.records import Record, RecordDraft
from tether.store import SessionKey, Store, open_store

try:
    __version__ = version("tether")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0"

__all__ = (
    "AgentDefinition",
    "AgentSpec",
    "Record",
    "RecordDraft",
    "Runtime",
    "SessionKey",
    "Store",
    "__version__",
    "open_store",
)
