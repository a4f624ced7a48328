"""The console's sign-in (issue 23, item 6): ``POST /ui/login`` checks the token and sets an
HttpOnly, SameSite=Strict cookie that the Guard takes instead of the bearer header (what a
browser's ``EventSource`` needs), ``POST /ui/logout`` clears it (and revokes it: see
test_console_cookie.py)."""

import asyncio
import hmac
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tether.demo import demo_agents
from tether.http._console_cookie import COOKIE
from tether.store import MemoryStore, Store

from .conftest import Server
from .test_openapi import Checked, _document

Serve = Callable[..., Any]
TOKEN = "s3cret-token"


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    yield MemoryStore()


def _cookie(response: httpx.Response) -> str:
    [header] = response.headers.get_list("set-cookie")
    return header


async def test_the_right_token_sets_an_httponly_strict_cookie(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token=TOKEN)
    call = Checked(server.client, _document(auth_token=TOKEN))
    signed_in = await call("POST", "/ui/login", json={"token": TOKEN})
    assert signed_in.status_code == 200
    assert signed_in.json() == {"signedIn": True, "authRequired": True}
    cookie = _cookie(signed_in)
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert cookie.startswith(f"{COOKIE}=")
    assert {"httponly", "samesite=strict", "path=/", "max-age=43200"} <= attributes
    assert "secure" not in attributes  # plain http on loopback: a Secure cookie would not come
    assert TOKEN not in cookie  # the cookie is no bearer token


async def test_a_wrong_or_missing_token_is_refused_without_a_cookie(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token=TOKEN)
    call = Checked(server.client, _document(auth_token=TOKEN))
    for token in ("nope", TOKEN[:-1], TOKEN + "x", TOKEN.upper()):
        refused = await call("POST", "/ui/login", json={"token": token})
        assert refused.status_code == 401, token
        assert refused.json()["error"]["type"] == "unauthorized"
        assert "set-cookie" not in refused.headers
    assert (await call("POST", "/ui/login", json={})).status_code == 422
    assert (await call("POST", "/ui/login", json={"token": ""})).status_code == 422
    malformed = {"content": b"{", "headers": {"content-type": "application/json"}}
    assert (await call("POST", "/ui/login", **malformed)).status_code == 400


async def test_the_token_is_compared_in_constant_time(
    asgi: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    server: Server = await asgi(demo_agents(), auth_token=TOKEN)
    await server.client.post("/ui/login", json={"token": "guess"})
    assert (b"guess", TOKEN.encode()) in compared
    login = await server.client.post("/ui/login", json={"token": TOKEN})
    signed, _, signature = login.cookies[COOKIE].rpartition(".")
    compared.clear()
    forged = f"{signed}.{'0' * len(signature)}"
    await server.client.get("/sessions", headers={"Cookie": f"{COOKIE}={forged}"})
    assert [(a, b) for a, b in compared if a == b"0" * len(signature)] == [
        (b"0" * len(signature), signature.encode())
    ]


async def test_the_cookie_opens_the_api_and_the_stream(serve: Serve) -> None:
    """On uvicorn: the cookie alone (no header) reads a page, admits a message and follows
    the session's SSE stream, as a browser's EventSource would."""
    server: Server = await serve(demo_agents(), auth_token=TOKEN, heartbeat=0.05)
    anonymous = server.client
    assert (await anonymous.get("/sessions")).status_code == 401
    login = await anonymous.post("/ui/login", json={"token": TOKEN})
    jar = {COOKIE: login.cookies[COOKIE]}
    async with httpx.AsyncClient(base_url=server.url, cookies=jar, timeout=60) as browser:
        assert (await browser.get("/sessions")).status_code == 200
        sent = await browser.post(
            "/agents/assistant/me", params={"wait": True}, json={"body": "hello"}
        )
        assert sent.status_code == 200, sent.text
        async with asyncio.timeout(30):
            async with browser.stream(
                "GET", "/agents/assistant/me", params={"view": "stream", "follow": True}
            ) as stream:
                assert stream.status_code == 200
                seen = ""
                async for chunk in stream.aiter_text():
                    seen += chunk
                    if "You said: hello" in seen:
                        break
    async with httpx.AsyncClient(base_url=server.url, cookies={COOKIE: "x" * 64}) as forged:
        assert (await forged.get("/sessions")).status_code == 401


async def test_a_cookie_from_another_origin_changes_nothing(asgi: Serve) -> None:
    """SameSite=Strict keeps a browser from sending it cross-site; the Guard also refuses
    any request that changes something when the request says it comes from elsewhere, with
    the cookie or the bearer token (test_guard_sites.py)."""
    server: Server = await asgi(demo_agents(), auth_token=TOKEN)
    login = await server.client.post("/ui/login", json={"token": TOKEN})
    cookie = {"Cookie": f"{COOKIE}={login.cookies[COOKIE]}"}
    here = {**cookie, "Origin": "http://tether.test"}
    elsewhere = {**cookie, "Origin": "https://evil.example"}
    body = {"body": "hi"}
    c = server.client
    assert (await c.post("/agents/assistant/me", json=body, headers=here)).status_code == 202
    assert (await c.post("/agents/assistant/me", json=body, headers=elsewhere)).status_code == 403
    assert (await c.get("/sessions", headers=elsewhere)).status_code == 200  # reads change nothing
    bearer = {"Authorization": f"Bearer {TOKEN}", "Origin": "https://evil.example"}
    assert (await c.post("/agents/assistant/me", json=body, headers=bearer)).status_code == 403


async def test_logout_clears_the_cookie(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token=TOKEN)
    call = Checked(server.client, _document(auth_token=TOKEN))
    out = await call("POST", "/ui/logout", headers={"content-type": "application/json"})
    assert out.status_code == 200
    assert out.json() == {"signedIn": False, "authRequired": True}
    cookie = _cookie(out).lower()
    assert cookie.startswith(f"{COOKIE}=") and "max-age=0" in cookie


async def test_without_a_token_there_is_nothing_to_sign_in_to(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    call = Checked(server.client, _document())
    answer = await call("POST", "/ui/login", json={"token": "anything"})
    assert answer.json() == {"signedIn": True, "authRequired": False}
    assert "set-cookie" not in answer.headers
    out = await call("POST", "/ui/logout", headers={"content-type": "application/json"})
    assert out.json()["authRequired"] is False


async def test_a_stored_token_signs_in_and_its_revocation_signs_out(
    asgi: Serve, store: Store
) -> None:
    """Issue 39: with stored tokens (or JWTs) the console signs in with the caller's own
    credential; the cookie is checked as the bearer token would be, on every request."""
    from datetime import UTC, datetime

    from tether.auth import StoredTokens, issue_token
    from tether.store import TokenStore

    assert isinstance(store, TokenStore)
    issued = await issue_token(
        store, subject="ann", tenant="acme", scopes=["sessions:read"], now=datetime.now(UTC)
    )
    server: Server = await asgi(demo_agents(), authenticate=StoredTokens(store))
    c = server.client
    wrong = await c.post("/ui/login", json={"token": "tether_" + "x" * 43})
    assert wrong.status_code == 401
    assert wrong.json()["error"] == {"type": "unauthorized", "message": "unknown token"}
    signed_in = await c.post("/ui/login", json={"token": issued.token})
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json() == {"signedIn": True, "authRequired": True}
    assert "httponly" in _cookie(signed_in).lower()
    assert (await c.get("/me")).json()["subject"] == "ann"  # by the cookie alone
    assert (await c.post("/agents/assistant/me", json={"body": "hi"})).status_code == 403
    await store.revoke_token(issued.row.id, now=datetime.now(UTC))
    ended = await c.get("/me")
    assert ended.status_code == 401 and ended.json()["error"]["message"] == "token revoked"
    signed_out = await c.post("/ui/logout", headers={"Content-Type": "application/json"})
    assert signed_out.json() == {"signedIn": False, "authRequired": True}
    assert COOKIE not in c.cookies
