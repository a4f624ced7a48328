"""Approvals over HTTP: edits checked against the tool's schema, aborted gates closed."""

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from tether.demo import demo_agents

from .conftest import Server

Serve = Callable[..., Any]


async def pending_item(c: httpx.AsyncClient) -> dict[str, Any]:
    async with asyncio.timeout(60):
        while not (  # noqa: ASYNC110 - polling the API as a client would
            items := (await c.get("/approvals", params={"status": "pending"})).json()["approvals"]
        ):
            await asyncio.sleep(0.05)
    [item] = items
    return dict(item)


async def test_an_edit_that_does_not_fit_the_tool_is_422(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    body = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()
    item = await pending_item(c)
    before = (await c.get("/agents/assistant/me/records")).json()["records"]
    refused = await c.post(
        f"/approvals/{item['approvalId']}",
        json={"decision": "edit", "approver": "ann", "args": {"to": 42, "text": "hi"}},
    )
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_edit_args" and error["details"] == {"field": "args.to"}
    assert (await c.get("/agents/assistant/me/records")).json()["records"] == before
    assert (await c.get("/approvals", params={"status": "pending"})).json()["approvals"] == [item]
    edited = await c.post(
        f"/approvals/{item['approvalId']}",
        json={
            "decision": "edit",
            "approver": "ann",
            "args": {"to": "carol@example.com", "text": "hi"},
        },
    )
    assert edited.status_code == 200, edited.text
    info = (await c.get(f"/submissions/{body['submissionId']}", params={"wait": True})).json()
    assert info["settlement"]["status"] == "succeeded"


async def test_an_aborted_gate_is_closed(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    body = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()
    item = await pending_item(c)
    aborted = await c.post("/agents/assistant/me/abort", json={})
    assert aborted.status_code in (200, 202), aborted.text
    info = (await c.get(f"/submissions/{body['submissionId']}", params={"wait": True})).json()
    assert info["settlement"] == {
        "status": "aborted",
        "error": "aborted while waiting for approval",
        "errorCode": "aborted",
    }
    assert (await c.get("/approvals")).json()["approvals"] == []
    late = await c.post(
        f"/approvals/{item['approvalId']}", json={"decision": "approve", "approver": "ann"}
    )
    assert late.status_code == 409 and late.json()["error"]["type"] == "invalid_approval"
