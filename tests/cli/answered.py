"""The client commands against a server of a test's own: each request answered by a function
(httpx's ``MockTransport``), sent through :mod:`tether.client` as the commands send it."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tether.cli import _connect
from tether.client import TetherClient

__all__ = ("answered_by", "wire_record")


def answered_by(
    monkeypatch: pytest.MonkeyPatch, answer: Callable[[httpx.Request], httpx.Response]
) -> None:
    """Each client command's requests, from now on, answered by ``answer``."""

    def new_client(url: str, token: str | None, timeout: float | None) -> TetherClient:
        transport = httpx.MockTransport(answer)
        return TetherClient(url, token=token, timeout=timeout, transport=transport)

    monkeypatch.setattr(_connect, "new_client", new_client)


def wire_record(kind: str, seq: int, **payload: object) -> dict[str, object]:
    """A record in its wire form, as an answer holds one (``DecisionReceipt.decision``...):
    its payload ``payload``, its hashes made up (a client takes them as given)."""
    return {
        "seq": seq,
        "id": f"r{seq}",
        "kind": kind,
        "conversationId": "c1",
        "session": "default",
        "time": "2026-01-01T00:00:05+00:00",
        "payload": payload,
        "prevHash": "0" * 64,
        "hash": "1" * 64,
    }
