"""Session metadata and search over HTTP (issue 43, item 5): a dispatch's ``metadata``, the
merge patch route, and ``GET /sessions`` with ``q``, ``metadata.<key>`` and ``since``."""

from collections.abc import Callable
from typing import Any

from tests.engine.agents import echo_agent

from .conftest import Server
from .test_openapi import Checked, _document

Serve = Callable[..., Any]
MERGE_PATCH = {"content-type": "application/merge-patch+json"}


async def _send(server: Server, session: str, body: str, **extra: Any) -> dict[str, Any]:
    answer = await server.client.post(
        "/agents/echo/acme",
        params={"wait": True},
        json={"body": body, "session": session, **extra},
    )
    assert answer.status_code == 200, answer.text
    settled: dict[str, Any] = answer.json()
    return settled


def _ids(page: dict[str, Any]) -> list[str]:
    return [item["session"] for item in page["sessions"]]


async def test_a_dispatch_sets_metadata_and_a_patch_merges_it(asgi: Serve) -> None:
    server: Server = await asgi({"echo": echo_agent()})
    call = Checked(server.client, _document())
    await _send(server, "s1", "hello", metadata={"customer": "acme", "tier": 1})
    await _send(server, "s1", "again", metadata={"tier": 2, "vip": True})
    [item] = (await call("GET", "/sessions")).json()["sessions"]
    assert item["metadata"] == {"customer": "acme", "tier": 2, "vip": True}
    patched = await call(
        "PATCH",
        "/agents/echo/acme/metadata",
        params={"session": "s1"},
        content=b'{"vip": null, "region": "eu"}',
        headers=MERGE_PATCH,
    )
    assert patched.status_code == 200, patched.text
    assert patched.json() == {
        "agent": "echo",
        "instance": "acme",
        "session": "s1",
        "metadata": {"customer": "acme", "region": "eu", "tier": 2},
    }
    as_json = await call(
        "PATCH", "/agents/echo/acme/metadata", params={"session": "s1"}, json={"tier": None}
    )
    assert as_json.json()["metadata"] == {"customer": "acme", "region": "eu"}


async def test_bad_metadata_is_a_typed_4xx_and_changes_nothing(asgi: Serve) -> None:
    server: Server = await asgi({"echo": echo_agent()})
    await _send(server, "s1", "hello", metadata={"kept": "yes"})
    refusals: list[tuple[Any, int, str]] = [
        ({"nested": {"a": 1}}, 422, "invalid_request"),
        ({"": 1}, 422, "invalid_metadata"),
        ({"k" * 65: 1}, 422, "invalid_metadata"),
        ({f"k{n}": n for n in range(65)}, 422, "invalid_metadata"),
        ({"big": "x" * 9000}, 422, "invalid_metadata"),
        (["a"], 422, "invalid_request"),
    ]
    for body, status, kind in refusals:
        answer = await server.client.patch(
            "/agents/echo/acme/metadata", params={"session": "s1"}, json=body
        )
        assert answer.status_code == status, (body, answer.text)
        assert answer.json()["error"]["type"] == kind, answer.text
        dispatched = await server.client.post(
            "/agents/echo/acme", json={"body": "x", "session": "s2", "metadata": body}
        )
        assert dispatched.status_code == status, (body, dispatched.text)
    form = await server.client.patch(
        "/agents/echo/acme/metadata",
        params={"session": "s1"},
        content=b"a=1",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 415
    [item] = (await server.client.get("/sessions")).json()["sessions"]
    assert item["metadata"] == {"kept": "yes"}  # s2 was never admitted
    missing = await server.client.patch(
        "/agents/echo/acme/metadata", params={"session": "nope"}, json={"a": 1}
    )
    assert missing.status_code == 404
    for params in (
        {f"metadata.k{n}": "v" for n in range(9)},
        {"metadata.": "v"},
        {"since": "2026-01-01T00:00:00"},
        {"q": "x" * 1001},
    ):
        answer = await server.client.get("/sessions", params=params)
        assert answer.status_code == 422, (params, answer.text)
        assert "error" in answer.json()
    twice = await server.client.get("/sessions?metadata.a=1&metadata.a=2")
    assert twice.status_code == 422


async def test_sessions_are_searched_by_text_metadata_and_time(asgi: Serve) -> None:
    server: Server = await asgi({"echo": echo_agent()})
    call = Checked(server.client, _document())
    await _send(server, "a", "Where is my REFUND?", metadata={"customer": "acme", "tier": 1})
    await _send(server, "b", "refund for order 7", metadata={"customer": "globex"})
    await _send(server, "c", "nothing to see", metadata={"customer": "acme", "tier": 2})

    async def listed(**params: Any) -> list[str]:
        return _ids((await call("GET", "/sessions", params=params)).json())

    assert await listed(q="refund") == ["b", "a"]
    assert await listed(q="refund order") == ["b"]
    assert await listed(**{"metadata.customer": "acme"}) == ["c", "a"]
    assert await listed(**{"metadata.customer": "acme", "metadata.tier": "1"}) == ["a"]
    assert await listed(q="refund", **{"metadata.customer": "acme"}) == ["a"]
    assert await listed(q="absent") == []
    page = (await call("GET", "/sessions", params={"q": "refund", "limit": 1})).json()
    assert _ids(page) == ["b"] and page["nextCursor"]
    rest = await call("GET", "/sessions", params={"q": "refund", "cursor": page["nextCursor"]})
    assert _ids(rest.json()) == ["a"] and rest.json()["nextCursor"] is None
    everything = (await call("GET", "/sessions")).json()["sessions"]
    newest = everything[0]["lastActivityAt"]
    assert await listed(since=newest) == ["c"]
    assert await listed(since="2000-01-01T00:00:00Z") == ["c", "b", "a"]
