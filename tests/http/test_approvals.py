"""Approvals over HTTP: edits checked against the tool's schema, aborted gates closed.

In process (``asgi``); a gate is waited for by the appends of its conversation (its index
entry commits with the record that opens it), never by polling.
"""

from collections.abc import Callable
from typing import Any

from pydantic import JsonValue

from tether.demo import demo_agents
from tether.engine import AgentDefinition, AgentSpec
from tether.journal import Turn
from tether.messages import Mediation, ToolCall

from .conftest import Server, until_appended

Serve = Callable[..., Any]


async def pending_item(server: Server, conversation_id: str) -> dict[str, Any]:
    async def pending() -> list[dict[str, Any]]:
        response = await server.client.get("/approvals", params={"status": "pending"})
        return list(response.json()["approvals"])

    [item] = await until_appended(server, conversation_id, pending)
    return dict(item)


async def test_an_edit_that_does_not_fit_the_tool_is_422(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    body = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()
    item = await pending_item(server, body["conversationId"])
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


async def test_an_aborted_gate_is_closed(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    body = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()
    item = await pending_item(server, body["conversationId"])
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


async def listed(
    server: Server, count: int, awaiting: str | None = None, **params: str
) -> list[dict[str, Any]]:
    """The approvals listed with ``params`` once there are ``count`` of them, waiting on the
    appends of conversation ``awaiting``; without one, what is settled is final: one look."""

    async def counted() -> tuple[list[dict[str, Any]]] | None:
        items = (await server.client.get("/approvals", params=params)).json()["approvals"]
        if len(items) == count:
            return (list(items),)  # found, even when there are none to find
        assert awaiting is not None, f"{len(items)} approvals listed, not {count}: {items}"
        return None

    found = await counted() if awaiting is None else await until_appended(server, awaiting, counted)
    assert found is not None
    return found[0]


async def test_decided_and_closed_gates_stay_listed_for_the_audit(asgi: Serve) -> None:
    """A decision leaves the inbox (pending) for the history (decided: who, what, why, when);
    an abort closes its gate (closed); every status pages in request order by nextCursor."""
    server: Server = await asgi(demo_agents())
    c = server.client
    sent = {}
    for instance in ("ann", "bob", "cat"):
        body = {"body": f"email {instance}@example.com: hi"}
        sent[instance] = (await c.post(f"/agents/assistant/{instance}", json=body)).json()
        # One at a time: the request order is the sending order.
        await listed(server, len(sent), awaiting=sent[instance]["conversationId"])
    pending = await listed(server, 3)
    assert [item["instance"] for item in pending] == ["ann", "bob", "cat"]
    assert all(item["status"] == "pending" and item["requestedAt"] for item in pending)
    approve, reject, _ = (item["approvalId"] for item in pending)
    assert (
        await c.post(f"/approvals/{approve}", json={"approver": "ann", "decision": "approve"})
    ).status_code == 200
    refused = {"approver": "eve", "decision": "reject", "reason": "not today"}
    assert (await c.post(f"/approvals/{reject}", json=refused)).status_code == 200
    assert (await c.post("/agents/assistant/cat/abort", json={})).status_code in (200, 202)
    for receipt in sent.values():
        await c.get(f"/submissions/{receipt['submissionId']}", params={"wait": True})
    assert await listed(server, 0) == []

    decided = await listed(server, 2, status="decided")
    assert [item["approvalId"] for item in decided] == [approve, reject]
    assert decided[1]["decision"] == {
        "approvalId": reject,
        "callId": decided[1]["callId"],
        "decision": "reject",
        "reason": "not today",
        "approver": "eve",
    }
    assert decided[0]["decision"]["approver"] == "ann" and "reason" not in decided[0]["decision"]
    assert all(item["decidedAt"] >= item["requestedAt"] for item in decided)
    [closed] = await listed(server, 1, status="closed")
    assert closed["instance"] == "cat" and "decision" not in closed and closed["closedAt"]

    pages, cursor = [], None
    while True:
        params = {"status": "all", "limit": "1", **({"cursor": cursor} if cursor else {})}
        page = (await c.get("/approvals", params=params)).json()
        pages += page["approvals"]
        if (cursor := page["nextCursor"]) is None:
            break
    assert [item["approvalId"] for item in pages] == [item["approvalId"] for item in pending]
    assert [item["status"] for item in pages] == ["decided", "decided", "closed"]

    assert [i["instance"] for i in await listed(server, 1, status="all", instance="bob")] == ["bob"]
    assert len(await listed(server, 2, status="decided", tool="send_email", agent="assistant")) == 2
    assert await listed(server, 0, status="all", agent="nobody") == []
    assert await listed(server, 0, status="all", tool="\x00") == []


async def test_bad_approval_queries_are_422(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    for params in (
        {"status": "completed"},
        {"status": ""},
        {"limit": "0"},
        {"limit": "1001"},
        {"limit": str(2**63)},
        {"limit": "ten"},
        {"cursor": "not a cursor"},
        {"cursor": ""},
        {"cursor": "MTox"},  # base64 of "1:1": no conversation
        {"cursor": "x" * 3000},
        {"agent": "a" * 201},
    ):
        response = await c.get("/approvals", params=params)
        assert response.status_code == 422, (params, response.text)
        assert response.json()["error"]["message"]
    bad = (await c.get("/approvals", params={"cursor": "MTox"})).json()["error"]
    assert bad["type"] == "invalid_cursor" and bad["details"] == {"field": "cursor"}


class _Deferring:
    """Asks for an approval and an input whose calls carry what a framework attached."""

    name, version = "deferring", "1"

    async def run(self, turn: Turn) -> JsonValue:
        for call_id, mediation in (("c1", Mediation.APPROVAL), ("c2", Mediation.INPUT)):
            await turn.tool(
                ToolCall(
                    call_id=call_id,
                    name="refund",
                    args={"amount": 500},
                    idempotency_key=f"{turn.execution_id}:{call_id}",
                    mediation=mediation,
                    metadata={"reason": "over the limit", "call": call_id},
                )
            )
        return "done"


async def test_the_listings_carry_what_the_framework_attached(asgi: Serve) -> None:
    spec = AgentSpec(harness=_Deferring())
    server: Server = await asgi({"deferring": AgentDefinition(lambda instance, env: spec)})
    c = server.client
    body = (await c.post("/agents/deferring/me", json={"body": "go"})).json()
    item = await pending_item(server, body["conversationId"])
    assert item["metadata"] == {"reason": "over the limit", "call": "c1"}
    decided = await c.post(
        f"/approvals/{item['approvalId']}", json={"decision": "reject", "approver": "ann"}
    )
    assert decided.status_code == 200, decided.text

    async def asked() -> list[dict[str, Any]]:
        return list((await c.get("/inputs")).json()["inputs"])

    [question] = await until_appended(server, body["conversationId"], asked)
    assert question["metadata"] == {"reason": "over the limit", "call": "c2"}
    listed = (await c.get("/approvals", params={"status": "decided"})).json()["approvals"]
    assert [a["metadata"] for a in listed] == [{"reason": "over the limit", "call": "c1"}]
