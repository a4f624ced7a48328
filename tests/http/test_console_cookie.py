"""The console's cookie expires and signs out for good (issue 36, item 10): it carries its
issue time under the server's signature and lasts a lifetime (``Max-Age``, and checked by the
server whatever the browser keeps); ``POST /ui/logout`` revokes it in the store, so a copy
replayed later is refused by this server, by another on the same store, and after a restart.
On every store backend: the revocation is the store's."""

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tether.demo import demo_agents
from tether.engine import ManualClock
from tether.errors import StoreUnavailable
from tether.http._console_cookie import COOKIE, DEFAULT_LIFETIME

from .conftest import Server

Serve = Callable[..., Any]
TOKEN = "s3cret-token"


async def _sign_in(server: Server) -> str:
    """A browser's sign-in, a fresh one (the client keeps no cookie of an earlier one)."""
    server.client.cookies.clear()
    login = await server.client.post("/ui/login", json={"token": TOKEN})
    assert login.status_code == 200, login.text
    return str(login.cookies[COOKIE])


async def _reads(server: Server, cookie: str) -> int:
    """What a request with only the cookie gets (a fresh client: no cookie jar)."""
    answer = await server.client.get("/sessions", headers={"Cookie": f"{COOKIE}={cookie}"})
    return answer.status_code


def _attributes(response: httpx.Response) -> dict[str, str]:
    [header] = response.headers.get_list("set-cookie")
    pairs = (part.strip().partition("=") for part in header.split(";")[1:])
    return {name.lower(): value for name, _, value in pairs}


async def test_the_cookie_has_a_lifetime_of_twelve_hours_by_default(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token=TOKEN)
    login = await server.client.post("/ui/login", json={"token": TOKEN})
    assert DEFAULT_LIFETIME == 12 * 3600
    assert _attributes(login)["max-age"] == "43200"
    short: Server = await asgi(demo_agents(), auth_token=TOKEN, sign_in_lifetime=600)
    assert _attributes(await short.client.post("/ui/login", json={"token": TOKEN}))["max-age"] == (
        "600"
    )


async def test_an_expired_cookie_is_refused_whatever_the_browser_kept(asgi: Serve) -> None:
    clock = ManualClock()
    server: Server = await asgi(
        demo_agents(), auth_token=TOKEN, sign_in_lifetime=600, settings={"clock": clock}
    )
    cookie = await _sign_in(server)
    assert await _reads(server, cookie) == 200
    await clock.advance(599)
    assert await _reads(server, cookie) == 200
    await clock.advance(1)
    assert await _reads(server, cookie) == 401
    assert await _reads(server, await _sign_in(server)) == 200  # signing in again works


async def test_sign_out_revokes_the_cookie_here_on_other_servers_and_after_a_restart(
    asgi: Serve,
) -> None:
    first: Server = await asgi(demo_agents(), auth_token=TOKEN)
    another: Server = await asgi(demo_agents(), auth_token=TOKEN)  # a second node, one store
    cookie, kept = await _sign_in(first), await _sign_in(first)
    assert await _reads(first, cookie) == 200 and await _reads(another, cookie) == 200
    out = await first.client.post(
        "/ui/logout",
        headers={"Cookie": f"{COOKIE}={cookie}", "content-type": "application/json"},
    )
    assert out.status_code == 200 and _attributes(out)["max-age"] == "0"
    # The browser dropped it; a copy (a stolen one, a shared machine's) is refused anyway.
    assert await _reads(first, cookie) == 401
    assert await _reads(another, cookie) == 401
    stream = await another.client.get(
        "/agents/assistant/me", headers={"Cookie": f"{COOKIE}={cookie}"}
    )
    assert stream.status_code == 401
    await first.runtime.close()  # the first server stops; one starts again on its store
    restarted: Server = await asgi(demo_agents(), auth_token=TOKEN)
    assert await _reads(restarted, cookie) == 401
    # Another browser's sign-in stays.
    assert await _reads(restarted, kept) == 200


async def test_signing_in_again_keeps_the_sign_in_so_sign_out_ends_it(asgi: Serve) -> None:
    """A reload signs in again with the tab's token: were that a new cookie each time, signing
    out would revoke only the newest, and the earlier copies would last their lifetime."""
    clock = ManualClock()
    server: Server = await asgi(demo_agents(), auth_token=TOKEN, settings={"clock": clock})
    cookie = await _sign_in(server)
    await clock.advance(3600)
    server.client.cookies.clear()  # the cookie goes as a browser sends it, in the header
    again = await server.client.post(
        "/ui/login", json={"token": TOKEN}, headers={"Cookie": f"{COOKIE}={cookie}"}
    )
    assert again.cookies[COOKIE] == cookie
    left = int(_attributes(again)["max-age"])  # what is left (the issue time is in seconds)
    assert DEFAULT_LIFETIME - 3601 <= left <= DEFAULT_LIFETIME - 3600
    json_type = {"content-type": "application/json"}
    await server.client.post("/ui/logout", headers={"Cookie": f"{COOKIE}={cookie}", **json_type})
    assert await _reads(server, cookie) == 401
    # Signed out (or expired), signing in starts a new sign-in.
    server.client.cookies.clear()
    fresh = await server.client.post(
        "/ui/login", json={"token": TOKEN}, headers={"Cookie": f"{COOKIE}={cookie}"}
    )
    assert fresh.cookies[COOKIE] != cookie and await _reads(server, fresh.cookies[COOKIE]) == 200


@pytest.mark.parametrize(
    "forge",
    [
        lambda v: "1" + v,  # issued earlier: would last longer
        lambda v: v.replace(v.split(".")[1], "0" * 32),  # another id: one not signed out
        lambda v: v[:-1] + ("0" if v[-1] != "0" else "1"),  # another signature
        lambda v: v.rpartition(".")[0],  # no signature
        lambda v: "forged",
        lambda v: "",
        # A cookie of before this change (the token's HMAC of a fixed label) signs in again.
        lambda v: "a" * 64,
    ],
)
async def test_a_cookie_this_server_did_not_issue_is_refused(
    asgi: Serve, forge: Callable[[str], str]
) -> None:
    server: Server = await asgi(demo_agents(), auth_token=TOKEN)
    cookie = await _sign_in(server)
    assert await _reads(server, forge(cookie)) == 401
    other: Server = await asgi(demo_agents(), auth_token="another-token")
    assert await _reads(other, cookie) == 401  # signed with another server's token


async def test_signing_out_a_forged_cookie_writes_nothing(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token=TOKEN)
    cookie = await _sign_in(server)
    revoked: list[str] = []
    real = server.runtime.revoke

    async def spy(credential_id: str) -> None:
        revoked.append(credential_id)
        await real(credential_id)

    server.runtime.revoke = spy  # type: ignore[method-assign]
    headers = {"content-type": "application/json"}
    for value in ("forged", "1" + cookie, "0." + "0" * 32 + "." + "0" * 64):
        out = await server.client.post(
            "/ui/logout", headers={"Cookie": f"{COOKIE}={value}", **headers}
        )
        assert out.status_code == 200
    assert revoked == []
    assert await _reads(server, cookie) == 200


async def test_a_store_that_cannot_answer_is_a_503_not_a_sign_out(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token=TOKEN)
    cookie = await _sign_in(server)

    async def unavailable(credential_id: str) -> bool:
        raise StoreUnavailable("the store is closed")

    server.runtime.is_revoked = unavailable  # type: ignore[method-assign]
    answer = await server.client.get("/sessions", headers={"Cookie": f"{COOKIE}={cookie}"})
    assert answer.status_code == 503
    assert answer.json()["error"]["type"] == "store_unavailable"
