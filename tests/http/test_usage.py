"""``GET /usage`` (issue 41, item 1): a tenant's spending in a UTC day or month against its
budget, or a session's against its session budget, tenant-scoped like every route, on
memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import Any

from starlette.requests import HTTPConnection

from tether.agent import agent_spec, tool
from tether.auth import Identity, bearer_token
from tether.engine import AgentDefinition, Budget, TenantBudget
from tether.messages import Message, ModelRequest, ModelResponse, TextPart, ToolCallPart, Usage
from tether.models import ScriptedModel

from .conftest import Server

Serve = Callable[..., Any]
PEOPLE = {
    "ann": Identity("ann", tenant="acme", scopes=frozenset({"sessions:read", "sessions:write"})),
    "bob": Identity("bob", tenant="globex", scopes=frozenset({"sessions:read"})),
    "eve": Identity("eve", tenant="acme", scopes=frozenset({"approvals:read"})),
    "ops": Identity("ops"),
}


def _people(request: HTTPConnection) -> Identity | None:
    return PEOPLE.get(bearer_token(request) or "")


def _as(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}"}


@tool
async def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def _agent(**policy: Any) -> AgentDefinition:
    def reply(request: ModelRequest) -> ModelResponse:
        step = sum(1 for m in request.messages if m.role == "assistant") + 1
        parts: tuple[Any, ...] = (TextPart(text=f"step {step}"),)
        if step < 3:
            parts += (ToolCallPart(call_id=f"c{step}", name="lookup", args={"q": "x"}),)
        return ModelResponse(
            message=Message(role="assistant", parts=parts),
            usage=Usage(input_tokens=300, output_tokens=100),
        )

    spec = agent_spec(ScriptedModel(reply), tools=[lookup])
    return AgentDefinition(lambda instance, env: spec, **policy)


BUDGETS = {"acme": [TenantBudget(model_calls=100, cost_usd=5.0)], "*": TenantBudget(tokens=10)}


async def _server(asgi: Serve) -> Server:
    server: Server = await asgi(
        {"a": _agent()}, settings={"tenant_budgets": BUDGETS}, authenticate=_people
    )
    sent = await server.client.post(
        "/agents/a/desk?wait=true", json={"body": "go"}, headers=_as("ann")
    )
    assert sent.status_code == 200, sent.text
    return server


async def test_a_tenant_sees_its_spending_against_its_budget(asgi: Serve) -> None:
    server = await _server(asgi)
    c = server.client
    answer = await c.get("/usage", headers=_as("ann"))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    today = server.runtime.clock.now().astimezone(UTC).date()
    assert body["tenant"] == "acme" and body["period"] == "day"
    assert body["start"] == f"{today.isoformat()}T00:00:00Z"
    assert body["end"] > body["start"]
    assert body["spent"] == {"modelCalls": 3, "tokens": 1200, "costUsd": 0.0, "toolCalls": 2}
    assert body["budget"] == {"modelCalls": 100, "tokens": None, "costUsd": 5.0, "toolCalls": None}
    assert body["remaining"] == {
        "modelCalls": 97,
        "tokens": None,
        "costUsd": 5.0,
        "toolCalls": None,
    }
    month = (await c.get("/usage", params={"period": "month"}, headers=_as("ann"))).json()
    assert month["spent"]["modelCalls"] == 3 and month["budget"] is None
    assert month["start"] == f"{today.replace(day=1).isoformat()}T00:00:00Z"
    before = await c.get("/usage", params={"at": "2020-02-03"}, headers=_as("ann"))
    assert before.json()["spent"]["modelCalls"] == 0
    assert before.json()["start"] == "2020-02-03T00:00:00Z"
    mine = await c.get("/usage", params={"tenant": "acme"}, headers=_as("ann"))
    assert mine.json() == body
    ops = await c.get("/usage", params={"tenant": "acme"}, headers=_as("ops"))
    assert ops.json() == body
    other = await c.get("/usage", params={"tenant": "globex"}, headers=_as("ops"))
    assert other.json()["spent"]["modelCalls"] == 0
    assert other.json()["budget"] == {
        "modelCalls": None,
        "tokens": 10,
        "costUsd": None,
        "toolCalls": None,
    }


async def test_another_tenants_usage_is_not_found(asgi: Serve) -> None:
    server = await _server(asgi)
    c = server.client
    foreign = await c.get("/usage", params={"tenant": "acme"}, headers=_as("bob"))
    assert foreign.status_code == 404 and foreign.json()["error"]["type"] == "tenant_not_found"
    assert "1200" not in foreign.text
    own = await c.get("/usage", headers=_as("bob"))
    assert own.status_code == 200 and own.json()["tenant"] == "globex"
    scoped = await c.get("/usage", headers=_as("eve"))  # no sessions:read
    assert scoped.status_code == 403 and scoped.json()["error"]["type"] == "forbidden"


async def test_bad_input_is_a_422_envelope(asgi: Serve) -> None:
    server = await _server(asgi)
    c = server.client
    for params, field in (
        ({"period": "week"}, "query.period"),
        ({"at": "yesterday"}, "query.at"),
        ({"at": "2026-13-01"}, "query.at"),
        ({"tenant": ""}, "query.tenant"),
        ({"tenant": "x" * 201}, "query.tenant"),
    ):
        answer = await c.get("/usage", params=params, headers=_as("ann"))
        assert answer.status_code == 422, (params, answer.text)
        error = answer.json()["error"]
        assert error["type"] == "invalid_request"
        assert [p["field"] for p in error["details"]] == [field], answer.text
    unnamed = await c.get("/usage", headers=_as("ops"))  # an operator names the tenant
    assert unnamed.status_code == 422 and unnamed.json()["error"]["type"] == "invalid_request"


async def test_spending_is_kept_without_a_budget(asgi: Serve) -> None:
    """Without tenant budgets the aggregate is still kept: a run's spending is shown with no
    budget."""
    server: Server = await asgi({"a": _agent()}, authenticate=_people)
    await server.client.post("/agents/a/desk?wait=true", json={"body": "go"}, headers=_as("ann"))
    body = (await server.client.get("/usage", headers=_as("ann"))).json()
    assert body["spent"]["modelCalls"] == 3 and body["budget"] is None
    assert body["remaining"] is None


# --- a session's spending (GET /usage?session=) -----------------------------------------


async def _session_server(asgi: Serve) -> tuple[Server, str]:
    """A session of tenant ``acme`` under a session budget, after one run of three calls."""
    agents = {"a": _agent(session_budget=Budget(model_calls=10))}
    server: Server = await asgi(
        agents, settings={"session_budget": Budget(tokens=5000)}, authenticate=_people
    )
    sent = await server.client.post(
        "/agents/a/desk?wait=true", json={"body": "go"}, headers=_as("ann")
    )
    assert sent.status_code == 200, sent.text
    return server, sent.json()["conversationId"]


async def test_a_session_shows_its_spending_against_its_session_budget(asgi: Serve) -> None:
    server, conversation = await _session_server(asgi)
    c = server.client
    answer = await c.get("/usage", params={"session": conversation}, headers=_as("ann"))
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "conversationId": conversation,
        "agent": "a",
        "instance": "desk",
        "session": "default",
        "tenant": "acme",
        "spent": {"modelCalls": 3, "tokens": 1200, "costUsd": 0.0, "toolCalls": 2},
        "budget": {"modelCalls": 10, "tokens": 5000, "costUsd": None, "toolCalls": None},
        "remaining": {"modelCalls": 7, "tokens": 3800, "costUsd": None, "toolCalls": None},
        "submission": None,
    }
    ops = await c.get("/usage", params={"session": conversation}, headers=_as("ops"))
    assert ops.json() == answer.json()
    tenants = await c.get("/usage", headers=_as("ann"))  # the tenant form as before
    assert tenants.status_code == 200 and tenants.json()["tenant"] == "acme"


async def test_another_tenants_session_is_not_found(asgi: Serve) -> None:
    server, conversation = await _session_server(asgi)
    c = server.client
    for session in (conversation, "no-such-session"):
        foreign = await c.get("/usage", params={"session": session}, headers=_as("bob"))
        assert foreign.status_code == 404, foreign.text
        assert foreign.json()["error"]["type"] == "conversation_not_found"
        assert "1200" not in foreign.text
    scoped = await c.get("/usage", params={"session": conversation}, headers=_as("eve"))
    assert scoped.status_code == 403 and scoped.json()["error"]["type"] == "forbidden"


async def test_a_session_with_a_tenant_or_a_period_is_a_422(asgi: Serve) -> None:
    server, conversation = await _session_server(asgi)
    c = server.client
    for extra, field in (
        ({"tenant": "acme"}, "query.tenant"),
        ({"period": "day"}, "query.period"),
        ({"at": "2026-12-07"}, "query.at"),
    ):
        params = {"session": conversation, **extra}
        answer = await c.get("/usage", params=params, headers=_as("ann"))
        assert answer.status_code == 422, (extra, answer.text)
        error = answer.json()["error"]
        assert error["type"] == "invalid_request"
        assert [p["field"] for p in error["details"]] == [field], answer.text
    for session in ("", "x" * 201):
        answer = await c.get("/usage", params={"session": session}, headers=_as("ann"))
        assert answer.status_code == 422 and answer.json()["error"]["type"] == "invalid_request"
