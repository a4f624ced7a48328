"""A Python client of a Tether server: :class:`TetherClient` (blocking) and
:class:`AsyncTetherClient` (asyncio), on httpx (docs/client.md).

Every route is a method taking and returning the server's own wire models (those of
:mod:`tether.wire`, which ``/openapi.json`` is made from); an error answer is raised as the
:mod:`tether.errors` class the server raised; :meth:`TetherClient.stream` follows a session
across lost connections and server restarts (``Last-Event-ID``: nothing missed, nothing
twice); :meth:`TetherClient.send` follows a message to its :class:`Outcome`.

Example::

    from tether.client import TetherClient

    with TetherClient("http://127.0.0.1:8484") as client:
        outcome = client.send("assistant", "ann", "What is Tether?")
        print(outcome.settlement.result if outcome.settlement else outcome)
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.client._async import AsyncTetherClient
    from tether.client._call import Call
    from tether.client._defaults import DEFAULT_URL, WAIT_SLICE
    from tether.client._errors import RequestFailed, error_from_response
    from tether.client._operations import Multitask
    from tether.client._outcome import Outcome
    from tether.client._stream import Backoff, Streamed
    from tether.client._sync import TetherClient

# Loaded on first use: what reads an error answer or takes a default needs neither httpx nor
# the wire models.
_LAZY = {
    "AsyncTetherClient": "tether.client._async",
    "Call": "tether.client._call",
    "RequestFailed": "tether.client._errors",
    "error_from_response": "tether.client._errors",
    "WAIT_SLICE": "tether.client._defaults",
    "Multitask": "tether.client._operations",
    "Outcome": "tether.client._outcome",
    "Backoff": "tether.client._stream",
    "Streamed": "tether.client._stream",
    "DEFAULT_URL": "tether.client._defaults",
    "TetherClient": "tether.client._sync",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'tether.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = (
    "DEFAULT_URL",
    "WAIT_SLICE",
    "AsyncTetherClient",
    "Backoff",
    "Call",
    "Multitask",
    "Outcome",
    "RequestFailed",
    "Streamed",
    "TetherClient",
    "error_from_response",
)
