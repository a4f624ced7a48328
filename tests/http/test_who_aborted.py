"""Issue 39, item 3: an abort and an erase record who did them, as the server verified them.
An aborted settlement carries ``abortedBy`` (the cancel request keeps who asked for it,
``cancelRequestedBy``), whether the run was parked or in flight; an erase answers
``erasedBy`` and logs who erased the session, since the store keeps nothing of it. On the
memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from starlette.requests import HTTPConnection

from tether.auth import Identity, bearer_token
from tether.demo import demo_agents
from tether.engine import EngineEvent, SubmissionSettledEvent

from .conftest import Server
from .delegation import WAIT, Gate, team
from .test_approvals import pending_item

Serve = Callable[..., Any]
ANN = Identity("ann@acme", tenant="acme", display="Ann")
BOB = Identity("bob@acme", tenant="acme")
ANN_BY = {"subject": "ann@acme", "tenant": "acme", "display": "Ann"}
BOB_BY = {"subject": "bob@acme", "tenant": "acme"}
JSON = {"content-type": "application/json"}


def _people(request: HTTPConnection) -> Identity | None:
    return {"ann": ANN, "bob": BOB}.get(bearer_token(request) or "")


def _as(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {who}", **JSON}


async def _settled(server: Server, submission_id: str) -> dict[str, Any]:
    view = await server.client.get(
        f"/submissions/{submission_id}", params={"wait": True, "timeout": WAIT}
    )
    assert view.json()["status"] == "settled", view.text
    return dict(view.json())


async def test_an_abort_of_a_parked_run_records_who_aborted_it(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_people)
    c = server.client
    c.headers.update(_as("ann"))
    sent = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()
    await pending_item(server, sent["conversationId"])
    aborted = await c.post("/agents/assistant/me/abort", json={}, headers=_as("bob"))
    assert aborted.json()["aborted"] == [sent["submissionId"]]
    view = await _settled(server, sent["submissionId"])
    assert view["cancelRequestedBy"] == BOB_BY
    assert view["settlement"]["status"] == "aborted"
    assert view["settlement"]["abortedBy"] == BOB_BY
    records = (await c.get("/agents/assistant/me/records")).json()["records"]
    [settled] = [r for r in records if r["kind"] == "submission_settled"]
    assert settled["payload"]["abortedBy"] == BOB_BY  # in the hash-chained log too


async def test_an_abort_of_a_run_in_flight_records_who_aborted_it(asgi: Serve) -> None:
    gate = Gate()
    agents, settings = team("tides", gate=gate)
    server: Server = await asgi(agents, settings=settings, authenticate=_people)
    c = server.client
    c.headers.update(_as("ann"))
    accepted = (await c.post("/agents/assistant/me", json={"body": "ask"})).json()
    await gate.until_entered()
    [child] = (await c.get(f"/submissions/{accepted['submissionId']}")).json()["children"]
    aborted = await c.post(f"/submissions/{child['submissionId']}/abort", headers=_as("ann"))
    assert aborted.json()["cancelRequestedBy"] == ANN_BY
    ended = await _settled(server, child["submissionId"])
    assert ended["settlement"]["status"] == "aborted"
    assert ended["settlement"]["abortedBy"] == ANN_BY


async def test_without_auth_an_abort_names_no_one(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    sent = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()
    await pending_item(server, sent["conversationId"])
    await c.post("/agents/assistant/me/abort", json={})
    view = await _settled(server, sent["submissionId"])
    assert view["settlement"]["status"] == "aborted"
    assert "abortedBy" not in view["settlement"] and "cancelRequestedBy" not in view


async def test_an_erase_says_and_logs_who_erased_the_session(
    asgi: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server: Server = await asgi(demo_agents(), authenticate=_people)
    c = server.client
    sent = await c.post("/agents/assistant/me?wait=true", json={"body": "hi"}, headers=_as("ann"))
    cid = sent.json()["conversationId"]
    with caplog.at_level(logging.INFO, logger="tether.engine.events"):
        erased = await c.delete("/agents/assistant/me", headers=_as("bob"))
    assert erased.status_code == 200, erased.text
    assert erased.json()["erasedBy"] == BOB_BY
    [line] = [r for r in caplog.records if "erased" in r.getMessage()]
    assert "session assistant/me/default erased by bob@acme of acme" in line.getMessage()
    assert (line.subject, line.tenant, line.session, line.conversation_id) == (  # type: ignore[attr-defined]
        "bob@acme",
        "acme",
        "assistant/me/default",
        cid,
    )
    gone = await c.get("/agents/assistant/me/records", headers=_as("ann"))
    assert gone.status_code == 404  # nothing of it stays, who erased it included


async def test_a_forced_erase_aborts_what_runs_as_the_one_who_erases(asgi: Serve) -> None:
    settled: list[dict[str, Any]] = []

    def observe(event: EngineEvent) -> None:
        if isinstance(event, SubmissionSettledEvent):
            settled.append(dict(event.settlement))

    server: Server = await asgi(
        demo_agents(), settings={"observers": [observe]}, authenticate=_people
    )
    c = server.client
    c.headers.update(_as("ann"))
    sent = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()
    await pending_item(server, sent["conversationId"])
    erased = await c.delete("/agents/assistant/me", params={"force": True}, headers=_as("bob"))
    assert erased.status_code == 200, erased.text
    assert erased.json()["erasedBy"] == BOB_BY
    assert [s.get("abortedBy") for s in settled] == [BOB_BY]
