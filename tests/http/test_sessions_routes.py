"""The sessions routes (issue 22, items 1 and 2): a page of sessions, and an erase."""

from collections.abc import Callable
from typing import Any

from tests.engine.agents import echo_agent

from .conftest import Server
from .test_openapi import Checked, _document

Serve = Callable[..., Any]


async def _talk(server: Server, session: str, agent: str = "echo") -> dict[str, Any]:
    answer = await server.client.post(
        f"/agents/{agent}/acme", params={"wait": True}, json={"body": "hi", "session": session}
    )
    assert answer.status_code == 200, answer.text
    settled: dict[str, Any] = answer.json()
    return settled


async def test_sessions_are_listed_newest_first_and_paged(asgi: Serve) -> None:
    server: Server = await asgi({"echo": echo_agent(), "other": echo_agent()})
    call = Checked(server.client, _document())
    made = [await _talk(server, f"s{i}") for i in range(3)]
    await _talk(server, "x", agent="other")
    page = (await call("GET", "/sessions", params={"agent": "echo", "limit": 2})).json()
    assert [s["conversationId"] for s in page["sessions"]] == [
        made[2]["conversationId"],
        made[1]["conversationId"],
    ]
    first = page["sessions"][0]
    assert first["status"] == "idle" and first["pendingApprovals"] == 0
    assert first["records"] > 0 and first["bytes"] > 0 and "usage" not in first
    assert first["streamUrl"] == "/agents/echo/acme?session=s2"
    rest = (
        await call("GET", "/sessions", params={"agent": "echo", "cursor": page["nextCursor"]})
    ).json()
    assert [s["conversationId"] for s in rest["sessions"]] == [made[0]["conversationId"]]
    assert rest["nextCursor"] is None
    with_usage = (await call("GET", "/sessions", params={"usage": True})).json()
    assert {s["usage"]["calls"] for s in with_usage["sessions"]} == {1}


async def test_bad_session_pages_get_a_typed_4xx(asgi: Serve) -> None:
    server: Server = await asgi({"echo": echo_agent()})
    for params in ({"limit": 0}, {"status": "asleep"}, {"instance": "acme"}, {"cursor": "junk"}):
        answer = await server.client.get("/sessions", params=params)
        assert answer.status_code == 422, (params, answer.text)
        assert "error" in answer.json()


async def test_an_erase_reports_what_went_and_leaves_the_key_free(asgi: Serve) -> None:
    server: Server = await asgi({"echo": echo_agent()})
    call = Checked(server.client, _document())
    settled = await _talk(server, "gone")
    erased = (await call("DELETE", "/agents/echo/acme", params={"session": "gone"})).json()
    assert erased["conversationId"] == settled["conversationId"]
    assert erased["submissions"] == 1 and erased["records"] > 0
    missing = await server.client.delete("/agents/echo/acme", params={"session": "gone"})
    assert missing.status_code == 404 and missing.json()["error"]["type"]
    gone = await server.client.get(f"/submissions/{settled['submissionId']}")
    assert gone.status_code == 404
    assert (await _talk(server, "gone"))["conversationId"] != settled["conversationId"]
