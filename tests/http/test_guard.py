"""HTTP details (issue 18, item 10): HEAD everywhere GET is, the bearer scheme in any case,
no empty token, and a body that never arrives times out (no slowloris)."""

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Any

import pytest
from starlette.routing import Mount, Route

from tether.demo import demo_agents
from tether.engine import Runtime
from tether.http import create_app

from .conftest import Server

Serve = Callable[..., Any]


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.3")


def _get_paths(ids: dict[str, str]) -> list[str]:
    """Every GET route of the app, its path parameters filled in: those its OpenAPI document
    lists (the routers' routes, which FastAPI need not copy into ``app.routes``), and the
    docs pages, ``/openapi.json`` and the docs' assets, which it does not."""
    app = create_app(Runtime(demo_agents(), "memory://"))
    paths = [path.format(**ids) for path, ops in app.openapi()["paths"].items() if "get" in ops]
    # The one GET whose query is required of an identity of no tenant, as this one is.
    paths[paths.index("/usage")] = "/usage?tenant=acme"
    for route in app.routes:
        if isinstance(route, Route) and "GET" in (route.methods or ()):
            if not route.include_in_schema:
                paths.append(route.path)
        elif isinstance(route, Mount):  # the docs' assets
            paths.append(f"{route.path}/swagger-ui.css")
    return paths


async def test_head_answers_every_get_route_like_get_without_a_body(asgi: Serve) -> None:
    """On uvicorn: a HEAD is answered by the Guard and the server together (the server sends
    no body for it), and a followed stream's HEAD must end on a real connection."""
    server: Server = await asgi(demo_agents(), heartbeat=0.05)
    c = server.client
    done = (await c.post("/agents/assistant/me", params={"wait": True}, json={"body": "hi"})).json()
    ids = {
        "agent": "assistant",
        "instance": "me",
        "submission_id": done["submissionId"],
        "conversation_id": done["conversationId"],
        "chat_id": "default",  # an AI SDK chat is a session
        "delivery_id": "wh-none",  # the demo tells no URL: its HEAD is a 404 like its GET
    }
    paths = _get_paths(ids)
    assert {"/agents/assistant/me", "/healthz", "/docs", "/openapi.json"} <= set(paths)
    for path in paths:  # (``/`` redirects to the console's page)
        got = await c.get(path, follow_redirects=True)
        head = await c.head(path, follow_redirects=True)
        # An AI SDK chat with no run going on is 204 (what useChat's resume expects).
        ok = 204 if path.endswith("/ai-sdk/default/stream") else 200
        ok = 404 if path.endswith("/wh-none") else ok
        assert head.status_code == got.status_code == ok, (path, head.status_code, got.text)
        assert head.content == b"", path
        assert head.headers.get("content-type") == got.headers.get("content-type"), path
        assert head.headers["x-content-type-options"] == "nosniff"
    # A followed stream never ends; its HEAD does, at once.
    async with asyncio.timeout(30):
        followed = await c.head("/agents/assistant/me", params={"follow": True})
    assert followed.status_code == 200 and followed.content == b""
    assert followed.headers["content-type"].startswith("text/event-stream")
    missing = await c.head("/submissions/nope")
    assert missing.status_code == 404 and missing.content == b""
    post_only = await c.head("/approvals/x")
    assert post_only.status_code == 405


async def test_the_bearer_scheme_is_case_insensitive(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token="s3cret")
    c = server.client
    for given in ("Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR  s3cret"):
        response = await c.get("/approvals", headers={"Authorization": given})
        assert response.status_code == 200, given
    for given in ("Bearer", "Bearer s3cre", "Basic s3cret", "s3cret", "Bearers3cret"):
        response = await c.get("/approvals", headers={"Authorization": given})
        assert response.status_code == 401, given
        assert response.json()["error"]["type"] == "unauthorized"
    assert (await c.head("/approvals")).status_code == 401


@pytest.mark.parametrize("token", ["", " ", "\t"])
def test_an_empty_auth_token_is_refused(token: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        create_app(Runtime(demo_agents(), "memory://"), auth_token=token)


async def _raw_request(server: Server, request: bytes, *, trickle: int = 0) -> bytes:
    """Send ``request`` as it is, then up to ``trickle`` single bytes 0.1 s apart while no
    answer has come, and read the answer until the server closes.

    A plain socket, not asyncio's streams: a byte trickled just after the server closed
    makes its side answer with a reset, and a stream then raises the reset in place of the
    answer already received, where the socket still returns what arrived before it."""
    host, port = server.url.removeprefix("http://").split(":")
    loop = asyncio.get_running_loop()
    with socket.create_connection((host, int(port))) as sock:
        sock.setblocking(False)
        await loop.sock_sendall(sock, request)

        async def answer_to_eof() -> bytes:  # the server closes after a 408
            chunks = []
            with contextlib.suppress(ConnectionResetError):  # what came before it is kept
                while chunk := await loop.sock_recv(sock, 65536):
                    chunks.append(chunk)
            return b"".join(chunks)

        async with asyncio.timeout(60), asyncio.TaskGroup() as tasks:
            answer = tasks.create_task(answer_to_eof())
            for _ in range(trickle):
                await asyncio.sleep(0.1)  # the point: a client that trickles its body
                if answer.done():
                    break
                try:
                    await loop.sock_sendall(sock, b" ")
                except ConnectionError:  # closed already: the answer is on its way
                    break
        return answer.result()


async def test_a_body_that_never_arrives_times_out_with_408(serve: Serve) -> None:
    server: Server = await serve(demo_agents(), body_timeout=0.5)
    headers = (
        b"POST /agents/assistant/me HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    for sent in (headers, headers + b'{"body": "x'):  # nothing of the body, or some of it
        answer = await _raw_request(server, sent)
        status_line, _, rest = answer.partition(b"\r\n")
        assert status_line.startswith(b"HTTP/1.1 408"), answer
        assert b'"type":"request_timeout"' in rest
    assert await server.store.list_submissions() == []
    # Slow but complete bodies within the bound, and bodiless requests, are unaffected.
    ok = await server.client.post("/agents/assistant/me", json={"body": "hi"})
    assert ok.status_code == 202


async def test_a_slow_body_is_bounded_in_total_not_per_chunk(serve: Serve) -> None:
    server: Server = await serve(demo_agents(), body_timeout=1.0)
    headers = (
        b"POST /agents/assistant/me HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    # A byte every 0.1 s: each well within the bound, the whole body (100 s) far past it.
    answer = await _raw_request(server, headers, trickle=900)
    assert answer.startswith(b"HTTP/1.1 408"), answer
