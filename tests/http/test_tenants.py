"""Issue 39, items 2 and 5: tenant isolation over HTTP, on memory, SQLite and PostgreSQL.

Tenant A (acme) makes a session with an approval waiting, a session with a question
waiting, a fork and a schedule; tenant B (globex), holding every scope but ``admin``, then
calls every route with A's ids: each answers 404 as for an id that does not exist, each
listing shows none of A's, a cursor of A's listing shows B nothing of A's, and no response
to B holds any id or text of A's. An operator (no tenant) sees both."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import HTTPConnection

from tether.auth import ALL_SCOPES, Identity, bearer_token
from tether.demo import demo_agents
from tether.engine import Runtime, WebhookSettings
from tether.http import create_app
from tether.http._access import ROUTE_SCOPES
from tether.store import MemoryStore

from .conftest import Server, until_appended
from .test_inputs import Asker

Serve = Callable[..., Any]
EVERYTHING_BUT_ADMIN = frozenset(scope for scope in ALL_SCOPES if scope != "admin")
PEOPLE = {
    "ann": Identity("ann", tenant="acme", scopes=EVERYTHING_BUT_ADMIN),
    "bob": Identity("bob", tenant="globex", scopes=EVERYTHING_BUT_ADMIN),
    "ops": Identity("ops"),  # an operator: every tenant
}
SECRET = "acme-confidential"
HOOKS = {"webhook_settings": WebhookSettings(secret="whsec", allow=["127.0.0.0/8"])}


def _people(request: HTTPConnection) -> Identity | None:
    return PEOPLE.get(bearer_token(request) or "")


def _as(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}"}


def _agents() -> dict[str, Any]:
    from tether.engine import AgentDefinition, AgentSpec

    return {**demo_agents(), "asker": AgentDefinition(lambda i, e: AgentSpec(harness=Asker()))}


async def _acme(server: Server) -> dict[str, str]:
    """Ann's resources, by the name of the path parameter they fill."""
    c = server.client
    ann = _as("ann")
    parked = await c.post(
        "/agents/assistant/acme-desk",
        json={
            "body": f"email bob@example.com: {SECRET}",
            "callback": {"url": "http://127.0.0.1:9/acme-hook", "events": ["settled"]},
        },
        headers=ann,
    )
    assert parked.status_code == 202, parked.text
    cid, sid = parked.json()["conversationId"], parked.json()["submissionId"]

    async def pending() -> list[dict[str, Any]]:
        listed = await c.get("/approvals", headers=ann)
        return list(listed.json()["approvals"])

    [approval] = await until_appended(server, cid, pending)
    asked = (await c.post("/agents/asker/acme-desk", json={"body": "hi"}, headers=ann)).json()

    async def questions() -> list[dict[str, Any]]:
        return list((await c.get("/inputs", headers=ann)).json()["inputs"])

    [question] = await until_appended(server, asked["conversationId"], questions)
    forked = await c.post(f"/conversations/{cid}/fork", json={"atSeq": 2}, headers=ann)
    assert forked.status_code == 201, forked.text
    schedule = await c.post(
        "/schedules",
        json={"id": "acme-nightly", "agent": "assistant", "instance": "acme-desk",
              "cron": "0 3 * * *", "body": SECRET},
        headers=ann,
    )  # fmt: skip
    assert schedule.status_code == 201, schedule.text
    [delivery] = (await c.get("/webhook-deliveries", headers=ann)).json()["deliveries"]
    return {
        "agent": "assistant",
        "instance": "acme-desk",
        "conversation_id": cid,
        "submission_id": sid,
        "approval_id": approval["approvalId"],
        "input_id": question["inputId"],
        "gate_id": f"{cid}.1",  # in Ann's conversation: Bob's tenant check refuses it first
        "schedule_id": "acme-nightly",
        "fork_id": forked.json()["conversationId"],
        "chat_id": "default",  # an AI SDK chat is a session: Ann's
        "delivery_id": delivery["id"],
    }


def _marks(ids: dict[str, str]) -> list[str]:
    return [SECRET, *(v for k, v in ids.items() if k not in ("agent", "instance", "chat_id"))]


async def test_another_tenant_finds_nothing_of_a_tenants_sessions(asgi: Serve) -> None:
    server: Server = await asgi(_agents(), authenticate=_people, settings=HOOKS)
    ids = await _acme(server)
    c = server.client
    bob = _as("bob")
    answers: list[httpx.Response] = []
    for (method, path), scope in sorted(ROUTE_SCOPES.items()):
        if (
            scope == "admin"
            or "{" not in path
            or (path == "/agents/{agent}/{instance}" and method == "POST")
        ):
            continue
        url = re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], path)
        body: dict[str, Any] = {}
        if path.startswith("/approvals/"):
            body = {"decision": "approve"}
        elif path.startswith("/inputs/"):
            body = {"value": "x"}
        elif path.startswith("/budgets/"):
            body = {"decision": "reject"}
        elif path.endswith(("/steer", "/followup")):
            body = {"body": "x"}
        elif path.endswith("/fork"):
            body = {"atSeq": 1}
        elif path.endswith("/metadata"):
            body = {"owner": "bob"}
        elif path.endswith("/ag-ui"):
            message: dict[str, Any] = {"id": "m-1", "role": "user", "content": "x"}
            body = {"threadId": "default", "runId": "r-1", "messages": [message]}
            body |= {"state": {}, "tools": [], "context": [], "forwardedProps": {}}
        elif path.endswith("/ai-sdk"):
            parts = [{"type": "text", "text": "x"}]
            message = {"id": "m-1", "role": "user", "parts": parts}
            body = {"id": "default", "messages": [message], "trigger": "submit-message"}
        sent_body = body if method in ("POST", "PATCH") else None
        answer = await c.request(method, url, json=sent_body, headers=bob)
        answers.append(answer)
        if path.endswith("/ai-sdk/{chat_id}/stream"):
            # As for a chat that does not exist: no run going on (what useChat's resume
            # expects), which says nothing of Ann's.
            assert answer.status_code == 204 and answer.content == b"", answer.text
            continue
        assert answer.status_code == 404, (method, path, answer.status_code, answer.text)
    # A dispatch into A's session key is refused too, and writes nothing.
    sent = await c.post("/agents/assistant/acme-desk", json={"body": "hi"}, headers=bob)
    assert sent.status_code == 404
    answers.append(sent)
    # Every listing is B's own: empty, here, and past a cursor of A's.
    for path, key in (("/sessions", "sessions"), ("/approvals", "approvals"),
                      ("/inputs", "inputs"), ("/budgets", "budgets"),
                      ("/schedules", "schedules"),
                      ("/webhook-deliveries", "deliveries")):  # fmt: skip
        listed = await c.get(path, headers=bob, params={"limit": 1})
        assert listed.status_code == 200 and listed.json()[key] == [], (path, listed.text)
        answers.append(listed)
        own = (await c.get(path, headers=_as("ann"), params={"limit": 1})).json()
        if own.get("nextCursor"):
            later = await c.get(path, headers=bob, params={"cursor": own["nextCursor"]})
            assert later.json()[key] == []
            answers.append(later)
    answers.append(await c.get("/approvals", headers=bob, params={"status": "all"}))
    # A search finds none of A's sessions, by their words or their metadata (issue 43).
    for search in ({"q": SECRET}, {"q": "acme"}, {"metadata.owner": "bob"}):
        found = await c.get("/sessions", headers=bob, params=search)
        assert found.status_code == 200 and found.json()["sessions"] == [], found.text
        answers.append(found)
    assert (await c.get("/sessions", headers=_as("ann"), params={"q": SECRET})).json()["sessions"]
    for answer in answers:  # (a 404 may repeat what B's own request named)
        asked = str(answer.request.url) + answer.request.content.decode()
        for mark in _marks(ids):
            assert mark not in answer.text or mark in asked, (answer.request.url, mark)
    # The operator sees A's; A's own resources are still there, undecided and unanswered.
    seen = (await c.get("/sessions", headers=_as("ops"))).json()["sessions"]
    assert {s["instance"] for s in seen} == {"acme-desk"}
    pending = (await c.get("/approvals", headers=_as("ann"))).json()["approvals"]
    assert [a["approvalId"] for a in pending] == [ids["approval_id"]]


async def test_a_stream_of_another_tenants_session_never_starts(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_people)
    await server.client.post(
        "/agents/assistant/acme-desk?wait=true", json={"body": SECRET}, headers=_as("ann")
    )
    stream = await server.client.get("/agents/assistant/acme-desk", headers=_as("bob"))
    assert stream.status_code == 404 and SECRET not in stream.text


_OPERATIONS = ("send", "list", "records", "approvals", "submission")


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,  # the same examples every run: CI never meets a new one by chance
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(("ann", "bob")),
            st.sampled_from(_OPERATIONS),
            st.sampled_from(("desk", "lobby", "desk-2")),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_no_answer_to_one_tenant_ever_holds_anything_of_another(
    steps: list[tuple[str, str, str]],
) -> None:
    """A property (issue 39, item 5): whatever two tenants do, interleaved, on their own
    sessions and each other's, no answer to one holds the other's ids or text."""
    asyncio.run(_interleaved(steps))


async def _interleaved(steps: list[tuple[str, str, str]]) -> None:
    runtime = Runtime(demo_agents(), MemoryStore())
    app = create_app(runtime, manage_runtime=True, authenticate=_people)
    marks: dict[str, set[str]] = {"ann": set(), "bob": set()}
    answers: dict[str, list[httpx.Response]] = {"ann": [], "bob": []}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://tether.test"
        ) as client,
    ):
        for n, (who, operation, instance) in enumerate(steps):
            headers = _as(who)
            own = f"{who}-{instance}"  # each one's own instances, and the other's by name
            target = own if n % 3 else f"{'bob' if who == 'ann' else 'ann'}-{instance}"
            if operation == "send":
                text = f"secret-of-{who}-{n}"
                sent = await client.post(
                    f"/agents/assistant/{target}?wait=true", json={"body": text}, headers=headers
                )
                if sent.status_code in (200, 202):
                    marks[who] |= {text, sent.json()["submissionId"], sent.json()["conversationId"]}
                answers[who].append(sent)
            elif operation == "list":
                answers[who].append(await client.get("/sessions", headers=headers))
            elif operation == "records":
                answers[who].append(
                    await client.get(f"/agents/assistant/{target}/records", headers=headers)
                )
            elif operation == "approvals":
                params = {"status": "all"}
                answers[who].append(await client.get("/approvals", headers=headers, params=params))
            else:
                for other in sorted(marks["bob" if who == "ann" else "ann"]):
                    answers[who].append(await client.get(f"/submissions/{other}", headers=headers))
    for who, other in (("ann", "bob"), ("bob", "ann")):
        for answer in answers[who]:
            asked = str(answer.request.url) + answer.request.content.decode()
            for mark in marks[other]:
                assert mark not in answer.text or mark in asked, (who, answer.request.url, mark)
