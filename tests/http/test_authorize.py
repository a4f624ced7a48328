"""Issue 39, item 2: the ``authorize`` hook, asked on every route naming a resource after
its scope and tenant. The rule tested is the one docs/auth.md shows: only a session's owner
(who created it) may write to, abort or erase it; anyone of its tenant may read it. On the
memory, SQLite and PostgreSQL stores (the ``store`` fixture under ``asgi``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from starlette.requests import HTTPConnection

from tether.auth import Identity, Resource, Scope, bearer_token
from tether.demo import demo_agents
from tether.errors import Forbidden
from tether.http import create_app
from tether.records import Actor

from .conftest import Server
from .test_approvals import pending_item

Serve = Callable[..., Any]
ANN = Identity("ann@acme", tenant="acme", display="Ann")
BOB = Identity("bob@acme", tenant="acme")
GIL = Identity("gil@globex", tenant="globex")
OPS = Identity("ops")  # an operator: every tenant's
ANN_ACTOR = Actor(subject="ann@acme", tenant="acme", display="Ann")
_CHANGES: frozenset[Scope] = frozenset({"sessions:write", "sessions:abort", "sessions:erase"})


def _people(request: HTTPConnection) -> Identity | None:
    return {"ann": ANN, "bob": BOB, "gil": GIL, "ops": OPS}.get(bearer_token(request) or "")


def _as(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}"}


class OwnerRules:
    """Only the owner changes a session; anyone of the tenant reads it. Keeps what it was
    asked, to see the resources each route shows."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Scope, Resource]] = []

    def __call__(self, identity: Identity, action: Scope, resource: Resource) -> bool:
        self.asked.append((identity.subject, action, resource))
        if action not in _CHANGES or resource.owner is None:
            return True
        return resource.owner.subject == identity.subject


class AsyncOwnerRules(OwnerRules):
    async def __call__(  # type: ignore[override]
        self, identity: Identity, action: Scope, resource: Resource
    ) -> bool:
        return OwnerRules.__call__(self, identity, action, resource)


def _refused(response: Any, action: str, kind: str) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["type"] == "forbidden"
    assert error["details"] == {"action": action, "resource": kind}


async def _anns_session(server: Server) -> dict[str, Any]:
    sent = await server.client.post(
        "/agents/assistant/mine?wait=true", json={"body": "hi"}, headers=_as("ann")
    )
    assert sent.status_code == 200, sent.text
    return dict(sent.json())


@pytest.mark.parametrize("rules", [OwnerRules, AsyncOwnerRules], ids=["sync", "async"])
async def test_only_the_owner_changes_a_session_anyone_of_its_tenant_reads_it(
    asgi: Serve, rules: type[OwnerRules]
) -> None:
    hook = rules()
    server: Server = await asgi(demo_agents(), authenticate=_people, authorize=hook)
    c = server.client
    sent = await _anns_session(server)
    cid, sid = sent["conversationId"], sent["submissionId"]
    base = "/agents/assistant/mine"
    # Bob, of the same tenant, reads everything of it...
    for path in (
        f"{base}/records",
        f"{base}/messages",
        f"{base}/conversation",
        f"/conversations/{cid}/verify",
        f"/conversations/{cid}/usage",
        f"/conversations/{cid}/spans",
        f"/submissions/{sid}",
        f"/submissions/{sid}/tree",
    ):
        read = await c.get(path, headers=_as("bob"))
        assert read.status_code == 200, (path, read.text)
    # ...and changes nothing of it.
    _refused(
        await c.post(base, json={"body": "mine now"}, headers=_as("bob")),
        "sessions:write",
        "session",
    )
    _refused(
        await c.post(f"{base}/steer", json={"body": "x"}, headers=_as("bob")),
        "sessions:write",
        "session",
    )
    _refused(
        await c.post(f"{base}/followup", json={"body": "x"}, headers=_as("bob")),
        "sessions:write",
        "session",
    )
    _refused(
        await c.post(f"{base}/compact", json={}, headers=_as("bob")), "sessions:write", "session"
    )
    _refused(
        await c.post(f"{base}/abort", json={}, headers=_as("bob")), "sessions:abort", "session"
    )
    _refused(
        await c.post(f"/submissions/{sid}/abort", json={}, headers=_as("bob")),
        "sessions:abort",
        "submission",
    )
    _refused(await c.delete(base, headers=_as("bob")), "sessions:erase", "session")
    records = (await c.get(f"{base}/records", headers=_as("ann"))).json()["records"]
    assert [r["kind"] for r in records].count("user_message") == 1  # Bob's wrote nothing
    # Bob's own session is his to change; Ann's is hers.
    mine = await c.post("/agents/assistant/bobs?wait=true", json={"body": "hi"}, headers=_as("bob"))
    assert mine.status_code == 200, mine.text
    steered = await c.post(f"{base}/steer", json={"body": "x"}, headers=_as("ann"))
    assert steered.status_code == 409  # allowed: nothing runs to steer
    assert steered.json()["error"]["type"] == "no_run_in_flight"
    assert (await c.post(f"{base}/abort", json={}, headers=_as("ann"))).status_code == 200
    assert (
        await c.post(f"/submissions/{sid}/abort", json={}, headers=_as("ann"))
    ).status_code == 200
    erased = await c.delete(base, headers=_as("ann"))
    assert erased.status_code == 200, erased.text
    # What the hook was shown: the session, its tenant, id and owner.
    [(_, _, session)] = [
        (who, action, r) for who, action, r in hook.asked if action == "sessions:erase"
    ][-1:]
    assert session == Resource("session", "assistant", "mine", "default", "acme", cid, ANN_ACTOR)
    [submission] = {r for who, action, r in hook.asked if r.kind == "submission"}
    assert submission == Resource(
        "submission", "assistant", "mine", "default", "acme", sid, ANN_ACTOR
    )
    new = [r for who, action, r in hook.asked if r.id is None]
    assert new == [
        Resource("session", "assistant", "mine", "default", "acme"),  # Ann's first message
        Resource("session", "assistant", "bobs", "default", "acme"),
    ]


async def test_an_approval_and_a_fork_show_their_sessions_owner(asgi: Serve) -> None:
    hook = OwnerRules()
    server: Server = await asgi(demo_agents(), authenticate=_people, authorize=hook)
    c = server.client
    sent = await c.post(
        "/agents/assistant/mine", json={"body": "email bob@example.com: hi"}, headers=_as("ann")
    )
    cid = sent.json()["conversationId"]
    c.headers.update(_as("bob"))
    item = await pending_item(server, cid)
    decided = await c.post(f"/approvals/{item['approvalId']}", json={"decision": "reject"})
    assert decided.status_code == 200, decided.text
    [approval] = [r for _, action, r in hook.asked if action == "approvals:decide"]
    assert approval == Resource(
        "approval", "assistant", "mine", "default", "acme", item["approvalId"], ANN_ACTOR
    )
    await c.get(f"/submissions/{sent.json()['submissionId']}?wait=true")
    forked = await c.post(f"/conversations/{cid}/fork", json={"atSeq": 2, "session": "bobs"})
    assert forked.status_code == 201, forked.text
    # The fork is Bob's: he made it, so he may write to it; Ann may not.
    _refused(
        await c.post("/agents/assistant/mine/followup", json={"body": "x"}),
        "sessions:write",
        "session",
    )
    steered = await c.post("/agents/assistant/mine/steer", json={"body": "x", "session": "bobs"})
    assert steered.json()["error"]["type"] == "no_run_in_flight", steered.text
    _refused(
        await c.delete("/agents/assistant/mine?session=bobs", headers=_as("ann")),
        "sessions:erase",
        "session",
    )
    owner = await server.runtime.created_by(
        await server.runtime.conversation("assistant", "mine", session="bobs")
    )
    assert owner == BOB.actor()


async def test_a_hook_raising_forbidden_is_answered_with_its_message(asgi: Serve) -> None:
    def closed(identity: Identity, action: Scope, resource: Resource) -> bool:
        if action == "sessions:read":
            return True
        raise Forbidden("the desk is closed on Sundays")

    server: Server = await asgi(demo_agents(), authenticate=_people, authorize=closed)
    refused = await server.client.post(
        "/agents/assistant/mine", json={"body": "hi"}, headers=_as("ann")
    )
    assert refused.status_code == 403
    assert refused.json()["error"] == {
        "type": "forbidden",
        "message": "the desk is closed on Sundays",
    }
    gone = await server.client.get("/agents/assistant/mine/records", headers=_as("ann"))
    assert gone.status_code == 404  # nothing was written


async def test_a_schedule_is_asked_about_and_another_tenants_session_stays_404(
    asgi: Serve,
) -> None:
    hook = OwnerRules()
    server: Server = await asgi(demo_agents(), authenticate=_people, authorize=hook)
    c = server.client
    body = {"agent": "assistant", "instance": "desk", "body": "digest", "every": 3600, "id": "d"}
    added = await c.post("/schedules", json=body, headers=_as("ann"))
    assert added.status_code == 201, added.text
    assert (await c.delete("/schedules/d", headers=_as("bob"))).status_code == 200
    schedules = [r for _, _, r in hook.asked if r.kind == "schedule"]
    assert schedules == [Resource("schedule", "assistant", "desk", "default", "acme", "d")] * 2
    # Another tenant's session is not found, before the hook is asked.
    sent = await _anns_session(server)
    asked = len(hook.asked)
    for response in (
        await c.get("/agents/assistant/mine/records", headers=_as("gil")),
        await c.post("/agents/assistant/mine/abort", json={}, headers=_as("gil")),
        await c.post(f"/submissions/{sent['submissionId']}/abort", json={}, headers=_as("gil")),
        await c.post("/agents/assistant/mine", json={"body": "hi"}, headers=_as("gil")),
    ):
        assert response.status_code == 404, response.text
    assert len(hook.asked) == asked


async def test_without_a_hook_no_owner_is_read(
    asgi: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_people)

    async def never(*args: Any) -> None:
        raise AssertionError("the owner was read without a hook")

    monkeypatch.setattr(server.runtime, "created_by", never)
    sent = await _anns_session(server)
    for path in ("/agents/assistant/mine/records", f"/submissions/{sent['submissionId']}"):
        assert (await server.client.get(path, headers=_as("bob"))).status_code == 200
    assert (
        await server.client.delete("/agents/assistant/mine", headers=_as("bob"))
    ).status_code == 200


def test_a_hook_needs_authentication() -> None:
    with pytest.raises(ValueError, match="authorize needs"):
        create_app(object(), authorize=lambda identity, action, resource: True)  # type: ignore[arg-type]


async def test_a_hook_answering_other_than_a_bool_is_a_500(asgi: Serve) -> None:
    def sloppy(identity: Identity, action: Scope, resource: Resource) -> bool:
        return "yes"  # type: ignore[return-value]

    server: Server = await asgi(demo_agents(), authenticate=_people, authorize=sloppy)
    answer = await server.client.post(
        "/agents/assistant/mine", json={"body": "hi"}, headers=_as("ann")
    )
    assert answer.status_code == 500
    assert answer.json()["error"]["type"] == "internal"


async def test_a_new_session_is_shown_as_the_tenant_it_will_be_created_for(asgi: Serve) -> None:
    hook = OwnerRules()
    server: Server = await asgi(
        demo_agents(),
        settings={"tenant_of": lambda agent, instance: instance.partition("-")[0]},
        authenticate=_people,
        authorize=hook,
    )
    sent = await server.client.post(
        "/agents/assistant/acme-desk?wait=true", json={"body": "hi"}, headers=_as("ops")
    )
    assert sent.status_code == 200, sent.text
    [new] = [r for _, _, r in hook.asked]
    assert new == Resource("session", "assistant", "acme-desk", "default", "acme")
    assert (
        await server.runtime.created_by(await server.runtime.conversation("assistant", "acme-desk"))
        == OPS.actor()
    )
