"""Issue 39, item 3: what a signed-in caller puts in records who they are (``by``: the
verified subject and tenant), the free-text approver and responder are only the names
shown, a client cannot claim to be someone else, and a tool knows who asked
(``ctx.identity``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import HTTPConnection

from tether.agent import ToolContext, agent_spec, tool
from tether.auth import Identity, bearer_token
from tether.demo import demo_agents
from tether.engine import AgentDefinition
from tether.models import Rule, ScriptedModel, ToolUse

from .conftest import Server
from .test_approvals import pending_item
from .test_inputs import agents as asker_agents
from .test_inputs import listed

Serve = Callable[..., Any]
ANN = Identity("ann@acme", tenant="acme", display="Ann")
BOB = Identity("bob@acme", tenant="acme")
ANN_BY = {"subject": "ann@acme", "tenant": "acme", "display": "Ann"}


def _people(request: HTTPConnection) -> Identity | None:
    return {"ann": ANN, "bob": BOB}.get(bearer_token(request) or "")


def _as(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}"}


async def _records(server: Server, who: str = "ann") -> list[dict[str, Any]]:
    response = await server.client.get("/agents/assistant/me/records", headers=_as(who))
    return list(response.json()["records"])


async def test_a_message_and_a_decision_record_who_made_them(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_people)
    c = server.client
    sent = await c.post(
        "/agents/assistant/me", json={"body": "email bob@example.com: hi"}, headers=_as("ann")
    )
    assert sent.status_code == 202, sent.text
    c.headers.update(_as("bob"))
    item = await pending_item(server, sent.json()["conversationId"])
    [message] = [r for r in await _records(server) if r["kind"] == "user_message"]
    assert message["payload"]["by"] == ANN_BY
    decided = await c.post(f"/approvals/{item['approvalId']}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    payload = decided.json()["decision"]["payload"]
    assert payload["by"] == {"subject": "bob@acme", "tenant": "acme"}
    assert payload["approver"] == "bob@acme"  # the identity's name: none was given
    again = await c.post(
        f"/approvals/{item['approvalId']}", json={"decision": "approve"}, headers=_as("ann")
    )
    assert again.status_code == 409  # another person's identical decision is not the same one
    decided_list = await c.get("/approvals", params={"status": "decided"})
    [listed_item] = decided_list.json()["approvals"]
    assert listed_item["decidedBy"] == {"subject": "bob@acme", "tenant": "acme"}
    assert listed_item["decision"]["approver"] == "bob@acme"
    assert listed_item["decision"]["by"] == listed_item["decidedBy"]  # as its record holds it


async def test_a_client_cannot_say_who_sent_a_message(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_people)
    forged = await server.client.post(
        "/agents/assistant/me",
        json={"body": "hi", "by": {"subject": "root"}},
        headers=_as("bob"),
    )
    assert forged.status_code == 422 and forged.json()["error"]["type"] == "invalid_request"
    nothing = await server.client.get("/agents/assistant/me/records", headers=_as("bob"))
    assert nothing.status_code == 404  # no session was made


async def test_an_answer_records_who_gave_it_under_the_name_given(asgi: Serve) -> None:
    server: Server = await asgi(asker_agents(), authenticate=_people)
    c = server.client
    c.headers.update(_as("ann"))
    sent = (await c.post("/agents/asker/me", json={"body": "hi"})).json()
    [item] = await listed(server, 1, sent["conversationId"])
    answered = await c.post(
        f"/inputs/{item['inputId']}", json={"value": "Ann", "responder": "front desk"}
    )
    assert answered.status_code == 200, answered.text
    payload = answered.json()["answer"]["payload"]
    assert payload["responder"] == "front desk" and payload["by"] == ANN_BY
    [done] = await listed(server, 1, status="answered")
    assert (done["responder"], done["decidedBy"]) == ("front desk", ANN_BY)


async def test_without_auth_nothing_is_recorded_of_who(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    await server.client.post("/agents/assistant/me?wait=true", json={"body": "hi"})
    records = (await server.client.get("/agents/assistant/me/records")).json()["records"]
    [message] = [r for r in records if r["kind"] == "user_message"]
    assert "by" not in message["payload"]


async def test_without_auth_a_decision_names_no_one_verified(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    sent = await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})
    item = await pending_item(server, sent.json()["conversationId"])
    assert "decidedBy" not in item
    decided = await c.post(f"/approvals/{item['approvalId']}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    [listed_item] = (await c.get("/approvals", params={"status": "decided"})).json()["approvals"]
    assert "decidedBy" not in listed_item and "by" not in listed_item["decision"]
    assert listed_item["decision"]["approver"] == decided.json()["decision"]["payload"]["approver"]


async def test_a_fork_records_who_made_it(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_people)
    c = server.client
    c.headers.update(_as("ann"))
    sent = await c.post("/agents/assistant/me?wait=true", json={"body": "hi"})
    assert sent.status_code == 200, sent.text
    cid = sent.json()["conversationId"]
    c.headers.update(_as("bob"))
    forked = await c.post(f"/conversations/{cid}/fork", json={"atSeq": 2, "session": "again"})
    assert forked.status_code == 201, forked.text
    records = await c.get("/agents/assistant/me/records", params={"session": "again"})
    created = [r for r in records.json()["records"] if r["kind"] == "conversation_created"]
    assert created[0]["payload"]["by"] == ANN_BY  # the parent's own (Ann's message made it)
    assert created[-1]["payload"]["by"] == {"subject": "bob@acme", "tenant": "acme"}
    assert created[-1]["payload"]["parent"] == {"conversationId": cid, "seq": 2, "reason": "fork"}
    verified = await c.get(f"/conversations/{forked.json()['conversationId']}/verify")
    assert verified.json()["ok"] is True


@tool
async def whoami(ctx: ToolContext) -> str:
    """Who asked."""
    return "nobody" if ctx.identity is None else f"{ctx.identity.subject} of {ctx.identity.tenant}"


async def test_a_tool_knows_who_asked(asgi: Serve) -> None:
    model = ScriptedModel([Rule("who", ToolUse("whoami", {})), Rule("", "done", on="tool")])
    spec = agent_spec(model, tools=[whoami])
    agents = {"assistant": AgentDefinition(lambda instance, env: spec)}
    server: Server = await asgi(agents, authenticate=_people)
    done = await server.client.post(
        "/agents/assistant/me?wait=true", json={"body": "who am I?"}, headers=_as("ann")
    )
    assert done.status_code == 200, done.text
    [outcome] = [r for r in await _records(server) if r["kind"] == "tool_outcome"]
    assert outcome["payload"]["content"] == "ann@acme of acme"
