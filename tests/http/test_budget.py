"""A dispatch's budget over HTTP: camelCase in the body, a bad one a 422 envelope."""

from collections.abc import Callable
from typing import Any

import pytest

from ..engine.test_budget import define, looping
from ..engine.waits import until_emitted

Serve = Callable[..., Any]


async def test_a_budget_in_the_body_limits_the_run(asgi: Serve) -> None:
    server = await asgi({"a": define(looping())})
    settled = await server.client.post(
        "/agents/a/me",
        params={"wait": True},
        json={"body": "go", "budget": {"modelCalls": 2, "tokens": 20000, "costUsd": 0.5}},
    )
    assert settled.status_code == 200
    body = settled.json()
    assert body["status"] == "failed" and body["errorCode"] == "budget_exhausted"
    assert body["result"] == "step 2"


@pytest.mark.parametrize(
    "budget",
    [{"modelCalls": -1}, {"tokens": "lots"}, {"costUsd": -0.5}, {"toolCalls": 1.5}, {"x": 1}],
)
async def test_a_bad_budget_is_a_422_envelope(asgi: Serve, budget: dict[str, Any]) -> None:
    server = await asgi({"a": define(looping())})
    refused = await server.client.post("/agents/a/me", json={"body": "go", "budget": budget})
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["type"] == "invalid_request" and error["message"]


async def _parked_gate(server: Any, submission_id: str) -> dict[str, Any]:
    """The pending budget gate of a submission, once ``GET /budgets`` lists it."""

    async def listed() -> list[dict[str, Any]]:
        page = (await server.client.get("/budgets")).json()["budgets"]
        return [g for g in page if g["submissionId"] == submission_id]

    found = await until_emitted(server.runtime, listed)
    return found[0]


async def test_a_run_parks_on_its_budget_and_a_decision_goes_over_http(asgi: Serve) -> None:
    server = await asgi({"a": define(looping())})
    c = server.client
    dispatched = await c.post(
        "/agents/a/me",
        json={"body": "go", "budget": {"modelCalls": 2, "onExhausted": "park"}},
    )
    assert dispatched.status_code == 202
    sid = dispatched.json()["submissionId"]
    gate = await _parked_gate(server, sid)
    assert (gate["limit"], gate["used"], gate["max"], gate["status"]) == (
        "modelCalls",
        2,
        2,
        "pending",
    )
    assert gate["spent"]["modelCalls"] == 2 and gate["budget"]["onExhausted"] == "park"
    assert gate["scope"] == "submission"
    gate_id = gate["gateId"]
    bad = await c.post(f"/budgets/{gate_id}", json={"decision": "approve", "extension": {"x": 1}})
    assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_request"
    missing = await c.post(f"/budgets/{gate_id}9", json={"decision": "reject"})
    assert missing.status_code == 404
    approved = await c.post(
        f"/budgets/{gate_id}",
        json={"decision": "approve", "extension": {"modelCalls": 1}, "approver": "ops"},
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["decision"]["kind"] == "budget_decided"
    again = await _parked_gate(server, sid)
    assert again["gateId"] != gate_id and again["max"] == 3
    decided = (await c.get("/budgets", params={"status": "decided"})).json()["budgets"]
    assert [(g["decision"], g["extension"], g["approver"]) for g in decided] == [
        ("approve", {"modelCalls": 1}, "ops")
    ]
    conflict = await c.post(f"/budgets/{gate_id}", json={"decision": "reject"})
    assert conflict.status_code == 409
    rejected = await c.post(f"/budgets/{again['gateId']}", json={"decision": "reject"})
    assert rejected.status_code == 200
    settled = await c.get(f"/submissions/{sid}", params={"wait": True})
    body = settled.json()["settlement"]
    assert body["status"] == "failed" and body["errorCode"] == "budget_exhausted"
    assert body["result"] == "step 3"
