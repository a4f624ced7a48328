"""Other sites' pages cannot drive the API (issue 36, item 5), with a token or without one.

- DNS rebinding: a page on a name its author controls, rebound to this server's address,
  reaches it with that name as ``Host``. Only the loopback names, the address the connection
  came in on and the hosts the operator allows are served (421 otherwise).
- Cross-site requests: a request that changes something and whose ``Origin`` is not the
  server's own (nor allowed) is refused (403); and a POST must say ``application/json``,
  body or not (415), which no page can send to another site without a CORS preflight.
"""

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tether.demo import demo_agents
from tether.http._console_cookie import COOKIE
from tether.store import MemoryStore, Store

from .conftest import IN_PROCESS_URL, Server

Serve = Callable[..., Any]
TOKEN = "s3cret-token"
ME = "/agents/assistant/me"
JSON = {"content-type": "application/json"}


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """The Guard answers before anything reads the store: one backend shows it."""
    yield MemoryStore()


@pytest.fixture(autouse=True)
def slow_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "30")  # in flight until aborted


@pytest.fixture(params=[None, TOKEN], ids=["no-token", "token"])
def token(request: pytest.FixtureRequest) -> str | None:
    return request.param  # type: ignore[no-any-return]


def _credentials(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


async def _signed_in(server: Server, token: str | None) -> dict[str, str]:
    """What a browser signed in to the console sends: its cookie (no bearer header)."""
    if token is None:
        return {}
    login = await server.client.post("/ui/login", json={"token": token})
    server.client.cookies.clear()  # sent only where a test says so
    return {"Cookie": f"{COOKIE}={login.cookies[COOKIE]}"}


async def _researching(server: Server, token: str | None) -> str:
    """A run in flight (its research tool takes 30 s): what an abort would end."""
    accepted = await server.client.post(
        ME, json={"body": "research tides"}, headers=_credentials(token)
    )
    assert accepted.status_code == 202, accepted.text
    return str(accepted.json()["submissionId"])


async def _untouched(server: Server, submission_id: str) -> bool:
    """Neither settled nor asked to stop."""
    submission = await server.store.get_submission(submission_id)
    return submission.settled_at is None and submission.cancel_requested_at is None


def _refused(response: Any, status: int, type_: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["type"] == type_, response.text
    assert response.headers["content-type"] == "application/json"


# --- Host -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["rebound.example", "rebound.example:8484", "tether.test.rebound.example", ""]
)
async def test_a_host_the_server_does_not_answer_to_is_refused_with_421(
    asgi: Serve, token: str | None, host: str
) -> None:
    server: Server = await asgi(demo_agents(), auth_token=token)
    headers = {"Host": host, **_credentials(token)}
    for method, path, body in (("GET", "/sessions", None), ("POST", ME, {"body": "hi"})):
        refused = await server.client.request(method, path, json=body, headers=headers)
        _refused(refused, 421, "misdirected_request")
        assert repr(host) in refused.json()["error"]["message"]
        assert "--allowed-host" in refused.json()["error"]["message"]
    refused = await server.client.get("/ui", headers={"Host": host})
    assert refused.status_code == 421  # nor the console's page, whose fetches would follow
    assert await server.store.list_submissions() == []


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost:8484",
        "LocalHost:1",
        "127.0.0.1",
        "127.0.0.1:8484",
        "[::1]",
        "[::1]:8484",
        "tether.test",  # the address the connection came in on (the ASGI scope's server)
        "TETHER.TEST:80",
    ],
)
async def test_loopback_names_and_the_connection_s_own_address_are_served(
    asgi: Serve, token: str | None, host: str
) -> None:
    server: Server = await asgi(demo_agents(), auth_token=token)
    headers = {"Host": host, **_credentials(token)}
    assert (await server.client.get("/sessions", headers=headers)).status_code == 200
    sent = await server.client.post(ME, json={"body": "hi"}, headers=headers)
    assert sent.status_code == 202, sent.text


async def test_allowed_hosts_add_names_and_a_star_allows_any(
    asgi: Serve, token: str | None
) -> None:
    server: Server = await asgi(
        demo_agents(), auth_token=token, allowed_hosts=["Agents.Example.com", "proxy.lan:8443"]
    )
    c, credentials = server.client, _credentials(token)
    for host in ("agents.example.com", "agents.example.com:8484", "proxy.lan:8443", "localhost"):
        answer = await c.get("/sessions", headers={"Host": host, **credentials})
        assert answer.status_code == 200, host
    for host in ("proxy.lan", "proxy.lan:80", "example.com", "x.agents.example.com"):
        answer = await c.get("/sessions", headers={"Host": host, **credentials})
        assert answer.status_code == 421, host
    anywhere: Server = await asgi(demo_agents(), auth_token=token, allowed_hosts=["*"])
    answer = await anywhere.client.get("/sessions", headers={"Host": "any.example", **credentials})
    assert answer.status_code == 200


@pytest.mark.parametrize("given", ["", " ", "http://example.com", "exa mple.com", "a/b"])
async def test_an_allowed_host_that_is_no_host_is_refused(asgi: Serve, given: str) -> None:
    with pytest.raises(ValueError, match="allowed host"):
        await asgi(demo_agents(), allowed_hosts=[given])


async def test_the_health_checks_answer_whatever_the_host(asgi: Serve, token: str | None) -> None:
    """A load balancer's probe names whatever it names; the answers hold nothing to read."""
    server: Server = await asgi(demo_agents(), auth_token=token)
    for path in ("/healthz", "/readyz"):
        assert (await server.client.get(path, headers={"Host": "10.1.2.3:8484"})).status_code == 200


# --- Origin -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "http://tether.test.evil.example",
        "http://tether.test:8080",  # another port: another origin (a dev server, say)
        "null",  # a sandboxed frame, a redirect across sites
        "tether.test",
    ],
)
async def test_a_change_from_another_origin_is_refused_with_403(
    asgi: Serve, token: str | None, origin: str
) -> None:
    server: Server = await asgi(demo_agents(), auth_token=token)
    submission = await _researching(server, token)
    c = server.client
    for credentials in (_credentials(token), await _signed_in(server, token)):
        headers = {"Origin": origin, **credentials}
        for method, path, body in (
            ("POST", ME, {"body": "hi"}),
            ("POST", f"{ME}/abort", {}),
            ("POST", f"/submissions/{submission}/abort", None),
            ("DELETE", ME, None),
            ("POST", "/schedules", {"agent": "assistant", "instance": "me", "every": 60}),
        ):
            sent = await c.request(method, path, json=body, headers={**JSON, **headers})
            _refused(sent, 403, "forbidden_origin")
            assert repr(origin) in sent.json()["error"]["message"]
        # Reading is not changing: a page of another site cannot read the answer anyway.
        assert (await c.get("/sessions", headers=headers)).status_code == 200
    assert await _untouched(server, submission)
    assert len(await server.store.list_submissions()) == 1
    assert (await c.get("/schedules", headers=_credentials(token))).json()["schedules"] == []


async def test_a_change_from_the_server_s_own_origin_is_served(
    asgi: Serve, token: str | None
) -> None:
    """What the console sends: its own origin, scheme aside (a TLS proxy in front is https
    to the browser and http to the server)."""
    server: Server = await asgi(demo_agents(), auth_token=token)
    for origin in (IN_PROCESS_URL, "https://tether.test", "http://TETHER.test"):
        for credentials in (_credentials(token), await _signed_in(server, token)):
            headers = {"Origin": origin, **credentials}
            sent = await server.client.post(ME, json={"body": "hi"}, headers=headers)
            assert sent.status_code == 202, (origin, sent.text)
    local = {"Origin": "http://localhost:8484", "Host": "localhost:8484", **_credentials(token)}
    assert (await server.client.post(ME, json={"body": "hi"}, headers=local)).status_code == 202


async def test_allowed_origins_may_change_things(asgi: Serve, token: str | None) -> None:
    server: Server = await asgi(
        demo_agents(), auth_token=token, allowed_origins=["https://App.Example.com"]
    )
    c, credentials = server.client, _credentials(token)
    allowed = {"Origin": "https://app.example.com", **credentials}
    assert (await c.post(ME, json={"body": "hi"}, headers=allowed)).status_code == 202
    other = {"Origin": "http://app.example.com", **credentials}  # another scheme: another site
    assert (await c.post(ME, json={"body": "hi"}, headers=other)).status_code == 403


@pytest.mark.parametrize("given", ["", "app.example.com", "https://", "https://a.example/path"])
async def test_an_allowed_origin_that_is_no_origin_is_refused(asgi: Serve, given: str) -> None:
    with pytest.raises(ValueError, match="allowed origin"):
        await asgi(demo_agents(), allowed_origins=[given])


# --- Content-Type -----------------------------------------------------------------------


async def test_a_bodyless_post_without_json_content_type_aborts_nothing(
    asgi: Serve, token: str | None
) -> None:
    """What a page of another site can send without a preflight (a ``no-cors`` fetch, a
    form): no ``Content-Type``, or a form's; and no ``Origin`` if a browser left it out."""
    server: Server = await asgi(demo_agents(), auth_token=token)
    submission = await _researching(server, token)
    c = server.client
    for credentials in (_credentials(token), await _signed_in(server, token)):
        for extra in (
            {},
            {"content-type": "text/plain"},
            {"content-type": "application/x-www-form-urlencoded"},
            {"content-type": "multipart/form-data; boundary=x"},
        ):
            for path in (f"{ME}/abort", f"/submissions/{submission}/abort", f"{ME}/compact"):
                sent = await c.post(path, headers={**credentials, **extra})
                _refused(sent, 415, "unsupported_media_type")
                assert "application/json" in sent.json()["error"]["message"]
            formed = await c.post(ME, content=b"body=hi", headers={**credentials, **extra})
            _refused(formed, 415, "unsupported_media_type")
    assert await _untouched(server, submission)
    assert len(await server.store.list_submissions()) == 1
    # Said to be JSON, with a body or without one, the abort goes through.
    aborted = await c.post(f"{ME}/abort", headers={**JSON, **_credentials(token)})
    assert aborted.status_code == 200 and aborted.json()["aborted"] == [submission]
    assert not await _untouched(server, submission)
    again = await c.post(f"{ME}/abort", json={}, headers=_credentials(token))
    assert again.status_code == 200, again.text


async def test_json_with_parameters_is_json(asgi: Serve, token: str | None) -> None:
    server: Server = await asgi(demo_agents(), auth_token=token)
    for kind in ("application/json; charset=utf-8", "Application/JSON", " application/json "):
        sent = await server.client.post(
            ME, content=b'{"body": "hi"}', headers={"content-type": kind, **_credentials(token)}
        )
        assert sent.status_code == 202, (kind, sent.text)
