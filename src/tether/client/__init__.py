"""A Python client of a Tether server: :class:`TetherClient` (blocking) and
:class:`AsyncTetherClient` (asyncio), on httpx (docs/client.md).

Every route is a method taking and returning the server's own wire models (those of
:mod:`tether.http`, which ``/openapi.json`` is made from); an error answer is raised as the
:mod:`tether.errors` class the server raised; :meth:`TetherClient.stream` follows a session
across lost connections and server restarts (``Last-Event-ID``: nothing missed, nothing
twice); :meth:`TetherClient.send` follows a message to its :class:`Outcome`.

Example::

    from tether.client import TetherClient

    with TetherClient("http://127.0.0.1:8484") as client:
        outcome = client.send("assistant", "ann", "What is Tether?")
        print(outcome.settlement.result if outcome.settlement else outcome)
"""

from tether.client._async import AsyncTetherClient
from tether.client._call import Call
from tether.client._errors import RequestFailed, error_from_response
from tether.client._operations import WAIT_SLICE, Multitask
from tether.client._outcome import Outcome
from tether.client._stream import Backoff, Streamed
from tether.client._sync import DEFAULT_URL, TetherClient

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
