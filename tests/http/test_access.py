"""Issue 39: every API route asks the request's identity for its scope (403 naming it, in
the envelope), an ``authenticate`` hook finds the identity (401 when it finds none or
refuses the credential), and ``ROUTE_SCOPES`` names every route and nothing else."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.routing import APIRoute
from starlette.requests import HTTPConnection

from tether.auth import ALL_SCOPES, Identity, bearer_token
from tether.demo import demo_agents
from tether.engine import Runtime
from tether.errors import Unauthenticated
from tether.http import create_app
from tether.http._access import ROUTE_SCOPES

from .conftest import Server

Serve = Callable[..., Any]
IDS = {"agent": "assistant", "instance": "me", "conversation_id": "c", "submission_id": "s"}
IDS |= {"approval_id": "a", "input_id": "i", "schedule_id": "x", "gate_id": "g", "chat_id": "c"}
IDS |= {"delivery_id": "d"}


def _identities(request: HTTPConnection) -> Identity | None:
    """``Bearer <scope>,<scope>...``: an identity holding those scopes; ``Bearer bad``: a
    refused credential; none: no identity."""
    token = bearer_token(request)
    if token is None:
        return None
    if token == "bad":
        raise Unauthenticated("token expired")
    scopes = frozenset(token.split(",")) - {""}
    return Identity("someone", tenant=None, scopes=scopes)  # type: ignore[arg-type]


def _path(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: IDS[m.group(1)], path)


def test_every_api_route_has_one_scope_and_the_table_nothing_else() -> None:
    app = create_app(Runtime(demo_agents(), "memory://"))
    scoped = {
        (method, route.path)
        for route in app.routes
        if isinstance(route, APIRoute) and route.include_in_schema
        for method in route.methods or ()
    } - {("GET", "/healthz"), ("GET", "/readyz"), ("POST", "/ui/login"), ("POST", "/ui/logout")}
    assert scoped == set(ROUTE_SCOPES)


SCOPED = sorted(route for route, scope in ROUTE_SCOPES.items() if scope is not None)


@pytest.mark.parametrize(("method", "path"), SCOPED)
async def test_a_route_refuses_an_identity_without_its_scope(
    asgi: Serve, method: str, path: str
) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_identities)
    needed = ROUTE_SCOPES[method, path]
    assert needed is not None
    others = ",".join(scope for scope in ALL_SCOPES if scope not in (needed, "admin"))
    body: dict[str, Any] | None = {} if method in ("POST", "PATCH") else None
    refused = await server.client.request(
        method, _path(path), json=body, headers={"Authorization": f"Bearer {others}"}
    )
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["type"] == "forbidden" and error["details"] == {"scope": needed}
    assert repr(needed) in error["message"] and "'someone'" in error["message"]
    for holder in (needed, "admin"):
        allowed = await server.client.request(
            method, _path(path), json=body, headers={"Authorization": f"Bearer {holder}"}
        )
        assert allowed.status_code not in (401, 403), (holder, allowed.text)


async def test_no_credential_or_a_refused_one_is_401_with_what_is_wrong(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_identities)
    missing = await server.client.get("/sessions")
    assert missing.status_code == 401
    assert missing.json()["error"]["type"] == "unauthorized"
    expired = await server.client.get("/sessions", headers={"Authorization": "Bearer bad"})
    assert expired.status_code == 401
    assert expired.json()["error"] == {"type": "unauthorized", "message": "token expired"}
    assert (await server.client.get("/healthz")).status_code == 200  # no credential asked


async def test_an_async_hook_and_a_server_without_auth(asgi: Serve) -> None:
    async def only_readers(request: HTTPConnection) -> Identity:
        return Identity("reader", scopes=frozenset({"sessions:read"}))

    reader: Server = await asgi(demo_agents(), authenticate=only_readers)
    assert (await reader.client.get("/sessions")).status_code == 200
    sent = await reader.client.post("/agents/assistant/me", json={"body": "hi"})
    assert sent.status_code == 403 and sent.json()["error"]["details"] == {
        "scope": "sessions:write"
    }


async def test_without_auth_every_route_is_open(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    assert (await server.client.get("/versions")).status_code == 200


async def test_an_identity_of_some_agents_is_refused_the_others(asgi: Serve) -> None:
    def only_assistant(request: HTTPConnection) -> Identity:
        return Identity("ann", agents=frozenset({"assistant"}))

    server: Server = await asgi(demo_agents(), authenticate=only_assistant)
    sent = await server.client.post("/agents/assistant/me?wait=true", json={"body": "hi"})
    assert sent.status_code == 200, sent.text
    other = await server.client.post("/agents/researcher/me", json={"body": "hi"})
    assert other.status_code == 403
    assert other.json()["error"] == {
        "type": "forbidden",
        "message": "'ann' may not use the agent 'researcher'",
    }


async def test_the_listings_of_an_identity_of_some_agents_show_only_theirs(asgi: Serve) -> None:
    """One agent: its listings are of that agent; several: one at a time (422 without
    ``?agent=``); another agent's listing is 403."""
    people = {
        "one": Identity("one", agents=frozenset({"assistant"})),
        "two": Identity("two", agents=frozenset({"assistant", "researcher"})),
    }

    def hook(request: HTTPConnection) -> Identity | None:
        return people.get(bearer_token(request) or "")

    server: Server = await asgi(demo_agents(), authenticate=hook)
    c = server.client
    admin: Server = await asgi(demo_agents())
    await admin.client.post("/agents/researcher/x?wait=true", json={"body": "hi"})
    await c.post("/agents/assistant/y?wait=true", json={"body": "hi"}, headers=_as("one"))
    for path, key in (
        ("/sessions", "sessions"),
        ("/approvals", "approvals"),
        ("/inputs", "inputs"),
    ):
        mine = await c.get(
            path, headers=_as("one"), params={"status": "all"} if key != "sessions" else {}
        )
        assert mine.status_code == 200, mine.text
        assert all(item["agent"] == "assistant" for item in mine.json()[key])
        refused = await c.get(path, headers=_as("one"), params={"agent": "researcher"})
        assert refused.status_code == 403
        several = await c.get(path, headers=_as("two"))
        assert several.status_code == 422 and several.json()["error"]["details"] == {
            "field": "agent"
        }
    [only] = (await c.get("/sessions", headers=_as("one"))).json()["sessions"]
    assert only["instance"] == "y"
    schedule = {"id": "s", "agent": "researcher", "instance": "x", "every": 60, "body": "b"}
    assert (await c.post("/schedules", json=schedule, headers=_as("one"))).status_code == 403


def _as(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}"}


def test_a_token_and_a_hook_together_are_refused() -> None:
    with pytest.raises(ValueError, match="not both"):
        create_app(
            Runtime(demo_agents(), "memory://"),
            auth_token="t",
            authenticate=_identities,
        )


def test_the_scopes_needed_are_known_scopes() -> None:
    needed = set(ROUTE_SCOPES.values()) - {None}
    assert needed <= set(ALL_SCOPES)


async def test_me_says_who_the_caller_is_to_any_identity(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_identities)
    me = await server.client.get("/me", headers={"Authorization": "Bearer approvals:decide"})
    assert me.status_code == 200
    assert me.json() == {"subject": "someone", "scopes": ["approvals:decide"]}
    open_server: Server = await asgi(demo_agents())
    anyone = (await open_server.client.get("/me")).json()
    assert anyone == {"subject": "anonymous", "scopes": list(ALL_SCOPES)}


async def test_every_route_refuses_a_bad_stored_token_saying_what_is_wrong(
    asgi: Serve, store: Any
) -> None:
    """Issue 39, item 5: every route (SSE and ``/me`` included) answers an expired, a
    revoked, an unknown and a malformed stored token with the 401 envelope naming which,
    and none of them reaches a route."""
    from datetime import UTC, datetime, timedelta

    from tether.auth import StoredTokens, issue_token

    now = datetime.now(UTC)
    everything = list(ALL_SCOPES)
    expired = await issue_token(
        store, subject="x", scopes=everything, now=now, expires_at=now + timedelta(hours=1)
    )
    revoked = await issue_token(store, subject="y", scopes=everything, now=now)
    await store.revoke_token(revoked.row.id, now=now)
    later = now + timedelta(hours=2)
    server: Server = await asgi(demo_agents(), authenticate=StoredTokens(store, now=lambda: later))
    credentials = {
        expired.token: "token expired",
        revoked.token: "token revoked",
        "tether_" + "A" * 43: "unknown token",
        "tether_short": "not a Tether token",
    }
    for method, path in sorted(ROUTE_SCOPES):
        for credential, said in credentials.items():
            answer = await server.client.request(
                method,
                _path(path),
                json={} if method == "POST" else None,
                headers={"Authorization": f"Bearer {credential}"},
            )
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.json()["error"] == {"type": "unauthorized", "message": said}
    assert not (await server.runtime.sessions()).sessions  # nothing was written
