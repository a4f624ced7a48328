"""How every example serves its app: the port is bound before anything is said, and the banner
is printed once the app has started and the port accepts connections.

A port another server holds (the demo's 8484, another example) stops the example at once
with one line on stderr and exit code 8, as ``tether serve`` does; no banner comes first to
say it serves where it does not.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI

__all__ = ("ADDRESS_IN_USE", "serve")

ADDRESS_IN_USE = 8
"""The exit code of an example whose address cannot be bound (``tether serve``'s too)."""


class _Announcing(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, announce: Callable[[], None]) -> None:
        super().__init__(config)
        self.announce = announce

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.announce()


def serve(
    app: FastAPI,
    host: str,
    port: int,
    banner: str,
    *,
    started: Callable[[], object] | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` until SIGINT or SIGTERM: print ``banner`` (then call
    ``started``) once it accepts connections; exit with :data:`ADDRESS_IN_USE` if the
    address cannot be bound. E.g.
    ``serve(create_app(runtime, manage_runtime=True), "127.0.0.1", 8491, "serving on ...")``.
    """
    listener = _listen(host, port)

    def announce() -> None:
        print(banner, flush=True)
        if started is not None:
            started()

    # An open stream (a console tab, a followed SSE) does not hold a Ctrl-C past 5 s.
    config = uvicorn.Config(app, timeout_graceful_shutdown=5)
    with listener:
        asyncio.run(_Announcing(config, announce).serve(sockets=[listener]))


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        busy = " (another server holds it: stop it or give --port)"
        hint = busy if exc.errno == errno.EADDRINUSE else ""
        print(f"error: cannot listen on {host}:{port}: {exc.strerror}{hint}", file=sys.stderr)
        raise SystemExit(ADDRESS_IN_USE) from None
    return sock
