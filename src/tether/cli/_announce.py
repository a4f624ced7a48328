"""A uvicorn server that says it serves only once it does (imported by ``serve`` alone)."""

from __future__ import annotations

import socket

import typer
import uvicorn

__all__ = ("AnnouncingServer",)


class AnnouncingServer(uvicorn.Server):
    """Prints ``banner`` once the app's startup has run and the sockets accept connections."""

    def __init__(self, config: uvicorn.Config, banner: str) -> None:
        super().__init__(config)
        self.banner = banner

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            typer.echo(self.banner)
