"""POST /conversations/{id}/fork says which tool calls its cut left without a result."""

from collections.abc import Callable
from typing import Any

from ..engine.agents import loop_agent
from .conftest import Server

Serve = Callable[..., Any]


async def test_a_fork_response_names_the_calls_its_cut_repaired(asgi: Serve) -> None:
    server: Server = await asgi({"loop": loop_agent()})
    c = server.client
    done = (await c.post("/agents/loop/me", params={"wait": True}, json={"body": "lookup"})).json()
    cid = done["conversationId"]
    records = (await c.get("/agents/loop/me/records")).json()["records"]
    called = next(r for r in records if r["kind"] == "tool_called")
    cut = await c.post(f"/conversations/{cid}/fork", json={"atSeq": called["seq"]})
    assert cut.status_code == 201, cut.text
    assert cut.json()["repairedCalls"] == [called["payload"]["callId"]]
    clean = await c.post(f"/conversations/{cid}/fork", json={"atSeq": called["seq"] + 1})
    assert clean.status_code == 201 and clean.json()["repairedCalls"] == []
