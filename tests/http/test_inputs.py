"""Inputs over HTTP, on a real uvicorn: a run that asks parks, ``GET /inputs`` lists the
question, ``POST /inputs/{id}`` answers it (checked against its schema, idempotent, final)
and the run resumes with the answer. Every answer of the inputs routes is checked against
``/openapi.json`` (``Checked``). A gate is waited for by the appends of its conversation,
never by polling."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import httpx
from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec
from tether.journal import Turn

from .conftest import Server, until_appended
from .test_openapi import Checked, _document

Serve = Callable[..., Any]
NAME: dict[str, JsonValue] = {"type": "string"}


class Asker:
    """Asks for a name (a string), or with no schema when the message says ``anything``;
    answers with what it was told."""

    name, version = "asker", "1"

    async def run(self, turn: Turn) -> JsonValue:
        anything = turn.inputs[-1].text == "anything"
        return await turn.ask("What is your name?", schema=None if anything else NAME)


def agents() -> dict[str, AgentDefinition]:
    return {"asker": AgentDefinition(lambda instance, env: AgentSpec(harness=Asker()))}


@functools.cache
def _doc() -> dict[str, Any]:
    return _document()


async def call(server: Server, method: str, url: str, **options: Any) -> httpx.Response:
    """The answer of ``method url``, checked against the document (status and body)."""
    return await Checked(server.client, _doc())(method, url, **options)


async def answer(server: Server, input_id: str, **body: Any) -> httpx.Response:
    return await call(server, "POST", f"/inputs/{input_id}", json=body)


async def listed(
    server: Server, count: int, awaiting: str | None = None, **params: str
) -> list[dict[str, Any]]:
    """The inputs listed with ``params`` once there are ``count`` of them, waiting on the
    appends of conversation ``awaiting``; without one, what is settled is final: one look."""

    async def counted() -> tuple[list[dict[str, Any]]] | None:
        response = await call(server, "GET", "/inputs", params=params)
        assert response.status_code == 200, response.text
        items = response.json()["inputs"]
        if len(items) == count:
            return (list(items),)  # found, even when there are none to find
        assert awaiting is not None, f"{len(items)} inputs listed, not {count}: {items}"
        return None

    found = await counted() if awaiting is None else await until_appended(server, awaiting, counted)
    assert found is not None
    return found[0]


async def ask(server: Server, instance: str, body: str = "hi") -> tuple[dict[str, Any], str]:
    """Send ``body`` to ``asker/instance``; its receipt and the conversation's records' path."""
    sent = await server.client.post(f"/agents/asker/{instance}", json={"body": body})
    assert sent.status_code == 202, sent.text
    return sent.json(), f"/agents/asker/{instance}/records"


async def records(server: Server, path: str) -> list[dict[str, Any]]:
    return list((await server.client.get(path, params={"limit": 1000})).json()["records"])


async def test_a_question_parks_the_run_and_its_answer_resumes_it(serve: Serve) -> None:
    server: Server = await serve(agents())
    c = server.client
    receipt, path = await ask(server, "me")
    conversation = receipt["conversationId"]
    [item] = await listed(server, 1, awaiting=conversation)
    requested = next(r for r in await records(server, path) if r["kind"] == "input_requested")
    assert item == {
        "inputId": f"{conversation}.{requested['seq']}",
        "conversationId": conversation,
        "seq": requested["seq"],
        "agent": "asker",
        "instance": "me",
        "session": "default",
        "submissionId": receipt["submissionId"],
        "executionId": requested["executionId"],
        "callId": "ask-1",
        "tool": "ask",
        "args": {},
        "prompt": "What is your name?",
        "schema": NAME,
        "requestedAt": item["requestedAt"],
        "status": "pending",
    }
    input_id = item["inputId"]
    waiting = (await c.get(f"/submissions/{receipt['submissionId']}")).json()
    assert waiting["status"] == "waiting" and waiting["waitReason"] == "input"
    assert (await c.get("/approvals", params={"status": "all"})).json()["approvals"] == []
    [session] = (await c.get("/sessions")).json()["sessions"]
    assert (session["pendingInputs"], session["pendingApprovals"]) == (1, 0)

    before = await records(server, path)
    wrong = await answer(server, input_id, value=42, responder="ann")
    assert wrong.status_code == 422, wrong.text
    error = wrong.json()["error"]
    assert error["type"] == "invalid_answer" and error["details"] == {"field": "value"}
    assert error["message"]
    assert await records(server, path) == before  # nothing written
    assert await listed(server, 1) == [item]

    unknown = await answer(server, f"{conversation}.999", value="Ann")
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["error"]["type"] == "input_not_found"
    assert (await answer(server, "nothing", value="Ann")).status_code == 404

    answered = await answer(server, input_id, value="Ann", responder="ann")
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert body["inputId"] == input_id
    record = body["answer"]
    assert record["kind"] == "input_answered" and record["conversationId"] == conversation
    assert record["payload"] == {
        "inputId": input_id,
        "callId": "ask-1",
        "value": "Ann",
        "responder": "ann",
    }
    again = await answer(server, input_id, value="Ann", responder="ann")
    assert again.status_code == 200 and again.json() == body  # the same record: idempotent
    other = await answer(server, input_id, value="Bob", responder="ann")
    assert other.status_code == 409, other.text
    assert other.json()["error"]["type"] == "input_conflict"

    info = (await c.get(f"/submissions/{receipt['submissionId']}", params={"wait": True})).json()
    assert info["settlement"] == {"status": "succeeded", "result": "Ann"}
    outcome = next(r for r in await records(server, path) if r["kind"] == "tool_outcome")
    assert outcome["payload"]["callId"] == "ask-1"
    assert outcome["payload"]["status"] == "ok" and outcome["payload"]["content"] == "Ann"
    assert [r["kind"] for r in await records(server, path)].count("input_answered") == 1

    assert await listed(server, 0) == []
    [done] = await listed(server, 1, status="answered")
    assert done["status"] == "answered" and done["answer"] == "Ann"
    assert done["responder"] == "ann" and done["answeredAt"] >= done["requestedAt"]
    assert "closedAt" not in done
    late = await answer(server, input_id, value="Bob", responder="bob")
    assert late.status_code == 409, late.text


async def test_a_null_answer_is_an_answer(asgi: Serve) -> None:
    """With no schema any JSON value is taken, ``null`` too; the listing shows it."""
    server: Server = await asgi(agents())
    c = server.client
    receipt, _ = await ask(server, "me", "anything")
    [item] = await listed(server, 1, awaiting=receipt["conversationId"])
    assert "schema" not in item and "answer" not in item
    answered = await answer(server, item["inputId"], value=None)
    assert answered.status_code == 200, answered.text
    assert answered.json()["answer"]["payload"]["responder"] == "api"  # the default
    info = (await c.get(f"/submissions/{receipt['submissionId']}", params={"wait": True})).json()
    assert info["settlement"]["status"] == "succeeded" and "result" not in info["settlement"]
    [done] = await listed(server, 1, status="answered")
    assert "answer" in done and done["answer"] is None


async def test_an_aborted_input_is_closed(asgi: Serve) -> None:
    server: Server = await asgi(agents())
    c = server.client
    receipt, _ = await ask(server, "me")
    [item] = await listed(server, 1, awaiting=receipt["conversationId"])
    assert (await c.post("/agents/asker/me/abort", json={})).status_code in (200, 202)
    info = (await c.get(f"/submissions/{receipt['submissionId']}", params={"wait": True})).json()
    assert info["settlement"]["status"] == "aborted"
    assert await listed(server, 0) == []
    [closed] = await listed(server, 1, status="closed")
    assert closed["inputId"] == item["inputId"] and closed["status"] == "closed"
    assert closed["closedAt"] and "answer" not in closed and "responder" not in closed
    late = await answer(server, item["inputId"], value="Ann")
    assert late.status_code == 409, late.text
    assert late.json()["error"]["type"] == "input_closed"


async def test_inputs_page_by_status_agent_and_instance(asgi: Serve) -> None:
    server: Server = await asgi(agents())
    c = server.client
    sent = []
    for instance in ("ann", "bob", "cat"):
        receipt, _ = await ask(server, instance)
        sent.append(receipt)
        # One at a time: the request order is the sending order.
        await listed(server, len(sent), awaiting=receipt["conversationId"])
    pending = await listed(server, 3)
    assert [item["instance"] for item in pending] == ["ann", "bob", "cat"]
    first = pending[0]["inputId"]
    assert (await answer(server, first, value="Ann")).status_code == 200
    await c.get(f"/submissions/{sent[0]['submissionId']}", params={"wait": True})

    pages, cursor = [], None
    while True:
        params = {"status": "all", "limit": "1", **({"cursor": cursor} if cursor else {})}
        page = (await call(server, "GET", "/inputs", params=params)).json()
        pages += page["inputs"]
        if (cursor := page["nextCursor"]) is None:
            break
    assert [item["inputId"] for item in pages] == [item["inputId"] for item in pending]
    assert [item["status"] for item in pages] == ["answered", "pending", "pending"]
    assert [i["instance"] for i in await listed(server, 1, status="all", instance="bob")] == ["bob"]
    assert len(await listed(server, 2, agent="asker")) == 2
    assert await listed(server, 0, status="all", agent="nobody") == []
    assert (await c.get("/approvals", params={"status": "all"})).json()["approvals"] == []


async def test_bad_queries_and_bodies_are_422(asgi: Serve) -> None:
    server: Server = await asgi(agents())
    c = server.client
    for params in (
        {"status": "decided"},
        {"status": ""},
        {"limit": "0"},
        {"limit": "1001"},
        {"limit": "ten"},
        {"cursor": "not a cursor"},
        {"cursor": "MTox"},  # base64 of "1:1": no conversation
        {"cursor": "x" * 3000},
        {"agent": "a" * 201},
    ):
        response = await call(server, "GET", "/inputs", params=params)
        assert response.status_code == 422, (params, response.text)
        assert response.json()["error"]["message"]
    bad = (await c.get("/inputs", params={"cursor": "MTox"})).json()["error"]
    assert bad["type"] == "invalid_cursor" and bad["details"] == {"field": "cursor"}
    for body in ({}, {"value": "x", "responder": ""}, {"value": "x", "extra": 1}):
        response = await call(server, "POST", "/inputs/c.1", json=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error"]["type"] == "invalid_request"
    broken = await c.post("/inputs/c.1", content=b"{", headers={"content-type": "application/json"})
    assert broken.status_code == 400 and broken.json()["error"]["type"] == "malformed_json"
