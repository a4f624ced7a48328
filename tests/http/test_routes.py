"""Every route and its errors, in process (the ``asgi`` fixture: none of them streams)."""

from collections.abc import Callable
from typing import Any

import pytest

from tether.demo import demo_agents
from tether.journal import Journal

from .conftest import Server, until_appended

Serve = Callable[..., Any]


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.3")


async def test_dispatch_wait_and_submission(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    accepted = await c.post("/agents/assistant/me", json={"body": "hello"})
    assert accepted.status_code == 202 and accepted.headers["location"].startswith("/submissions/")
    body = accepted.json()
    assert set(body) == {"submissionId", "conversationId", "session", "streamUrl"}
    info = (await c.get(f"/submissions/{body['submissionId']}", params={"wait": True})).json()
    assert info["status"] == "settled" and info["settlement"]["result"] == "You said: hello"
    waited = await c.post(
        "/agents/assistant/me", params={"wait": True}, json={"body": "what time is it?"}
    )
    assert waited.status_code == 200 and waited.json()["status"] == "succeeded"
    assert waited.headers["x-content-type-options"] == "nosniff"


async def test_idempotency_by_header_and_body(asgi: Serve) -> None:
    c = (await asgi(demo_agents())).client
    first = await c.post(
        "/agents/assistant/me", json={"body": "hi"}, headers={"Idempotency-Key": "k1"}
    )
    again = await c.post(
        "/agents/assistant/me", json={"body": "hi"}, headers={"Idempotency-Key": "k1"}
    )
    assert first.json()["submissionId"] == again.json()["submissionId"]
    conflict = await c.post(
        "/agents/assistant/me", json={"body": "other"}, headers={"Idempotency-Key": "k1"}
    )
    assert conflict.status_code == 409 and conflict.json()["error"]["type"] == "dispatch_conflict"
    by_body = await c.post("/agents/assistant/me", json={"body": "hi", "dispatchId": "d1"})
    assert (
        await c.post("/agents/assistant/me", json={"body": "hi", "dispatchId": "d1"})
    ).json() == by_body.json()


@pytest.mark.parametrize(
    ("kwargs", "status", "type_"),
    [
        (
            {"content": b"{bad", "headers": {"content-type": "application/json"}},
            400,
            "malformed_json",
        ),
        (
            {"content": b"x", "headers": {"content-type": "text/plain"}},
            415,
            "unsupported_media_type",
        ),
        ({"json": {"kind": "nope", "body": "x"}}, 422, "invalid_request"),
        ({"json": {"kind": "signal", "body": "x"}}, 422, "invalid_dispatch"),
        ({"json": {"body": "x", "resultSchema": {"type": 7}}}, 422, "invalid_dispatch"),
        ({"json": [1, 2]}, 422, "invalid_request"),
        (
            {"content": b"1" * 2_000_000, "headers": {"content-type": "application/json"}},
            413,
            "payload_too_large",
        ),
        (
            {
                "content": b"[" * 100_000 + b"]" * 100_000,
                "headers": {"content-type": "application/json"},
            },
            400,
            "malformed_json",
        ),
        (
            {
                "content": b'{"body": ' + b"9" * 100_000 + b"}",
                "headers": {"content-type": "application/json"},
            },
            400,
            "malformed_json",
        ),
        (
            {"content": b'{"body": "\xff\xfe"}', "headers": {"content-type": "application/json"}},
            400,
            "malformed_json",
        ),
    ],
)
async def test_bad_dispatches_are_typed_4xx_and_write_nothing(
    asgi: Serve, kwargs: dict[str, Any], status: int, type_: str
) -> None:
    server: Server = await asgi(demo_agents())
    response = await server.client.post("/agents/assistant/me", **kwargs)
    assert response.status_code == status, response.text
    assert response.json()["error"]["type"] == type_
    assert await server.store.list_submissions() == []


async def test_router_errors_use_the_envelope(asgi: Serve) -> None:
    c = (await asgi(demo_agents())).client
    missing = await c.get("/nope")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"
    wrong = await c.put("/agents/assistant/me")
    assert wrong.status_code == 405 and wrong.json()["error"]["type"] == "method_not_allowed"
    unknown = await c.post("/agents/nobody/me", json={"body": "x"})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "unknown_agent"
    assert (await c.get("/agents/assistant/never")).status_code == 404
    assert (await c.get("/submissions/nope")).status_code == 404
    assert (await c.get("/healthz")).json() == {"ok": True}
    assert (await c.get("/readyz")).json()["ready"] is True
    assert (await c.get("/openapi.json")).json()["info"]["title"] == "Tether"


async def test_records_messages_fork_and_verify(asgi: Serve) -> None:
    c = (await asgi(demo_agents())).client
    done = (
        await c.post("/agents/assistant/me", params={"wait": True}, json={"body": "hello"})
    ).json()
    page = (await c.get("/agents/assistant/me/records", params={"limit": 2})).json()
    assert [r["seq"] for r in page["records"]] == [1, 2] and page["next"] == 2
    rest = (await c.get("/agents/assistant/me/records", params={"after": 2})).json()
    assert rest["records"][-1]["kind"] == "submission_settled"
    messages = (await c.get("/agents/assistant/me/messages")).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    cid = done["conversationId"]
    assert (await c.get(f"/conversations/{cid}/verify")).json()["ok"] is True
    forked = await c.post(f"/conversations/{cid}/fork", json={"atSeq": 3, "session": "what-if"})
    assert forked.status_code == 201 and forked.json()["session"] == "what-if"
    assert (await c.post(f"/conversations/{cid}/fork", json={"atSeq": 999})).status_code == 422
    assert (await c.get("/conversations/nope/verify")).status_code == 404


async def test_approvals_over_http(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    body = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()

    async def pending() -> list[dict[str, Any]]:
        return list((await c.get("/approvals", params={"status": "pending"})).json()["approvals"])

    [item] = await until_appended(server, body["conversationId"], pending)
    assert item["tool"] == "send_email" and item["args"] == {"to": "bob@example.com", "text": "hi"}
    assert item["submissionId"] == body["submissionId"] and item["argsDigest"].startswith("sha256:")
    decided = await c.post(
        f"/approvals/{item['approvalId']}", json={"decision": "approve", "approver": "ann"}
    )
    assert decided.status_code == 200
    again = await c.post(
        f"/approvals/{item['approvalId']}", json={"decision": "approve", "approver": "ann"}
    )
    assert again.json() == decided.json()
    conflict = await c.post(
        f"/approvals/{item['approvalId']}", json={"decision": "reject", "approver": "ann"}
    )
    assert conflict.status_code == 409
    info = (await c.get(f"/submissions/{body['submissionId']}", params={"wait": True})).json()
    assert info["settlement"]["result"].startswith("Email sent")


async def test_steer_abort_and_compact(asgi: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "3")  # the steer lands while it runs
    server: Server = await asgi(demo_agents())
    c = server.client
    assert (await c.post("/agents/assistant/me/steer", json={"body": "x"})).status_code == 409
    running = (await c.post("/agents/assistant/me", json={"body": "research tides"})).json()

    async def researching() -> bool:
        records = (await c.get("/agents/assistant/me/records")).json()["records"]
        return any(r["kind"] == "tool_called" for r in records)

    await until_appended(server, running["conversationId"], researching)
    assert (
        await c.post("/agents/assistant/me/steer", json={"body": "the moon"})
    ).status_code == 200
    info = (await c.get(f"/submissions/{running['submissionId']}", params={"wait": True})).json()
    assert "the moon" in info["settlement"]["result"]
    slow = (await c.post("/agents/assistant/me", json={"body": "research slowly"})).json()
    aborted = (await c.post("/agents/assistant/me/abort", json={})).json()["aborted"]
    assert slow["submissionId"] in aborted
    compact = await c.post("/agents/assistant/me/compact", json={})
    assert compact.status_code == 202


async def test_auth_guards_everything_but_health(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token="s3cret")
    c = server.client
    assert (await c.get("/healthz")).status_code == 200
    denied = await c.post("/agents/assistant/me", json={"body": "hi"})
    assert denied.status_code == 401 and denied.json()["error"]["type"] == "unauthorized"
    ok = await c.post(
        "/agents/assistant/me", json={"body": "hi"}, headers={"Authorization": "Bearer s3cret"}
    )
    assert ok.status_code == 202
    _ = Journal


async def test_chunked_bodies_are_capped_too(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), max_body=1000)

    async def chunks() -> Any:
        for _ in range(10):
            yield b" " * 500

    response = await server.client.post(
        "/agents/assistant/me", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413 and response.json()["error"]["type"] == "payload_too_large"
    assert await server.store.list_submissions() == []


_JSON = {"content-type": "application/json"}
BAD_REQUESTS: list[tuple[str, str, dict[str, Any], int, str]] = [
    ("POST", "/agents/assistant/me", {"json": {"body": 7}}, 422, "invalid_request"),
    ("POST", "/agents/assistant/me", {"json": {"body": "x", "extra": 1}}, 422, "invalid_request"),
    ("POST", "/agents/assistant/me", {"json": {"body": "x", "session": ""}}, 422, ""),
    ("POST", "/agents/assistant/me", {"json": {"body": "x", "session": "s" * 500}}, 422, ""),
    ("POST", "/agents/assistant/" + "i" * 500, {"json": {"body": "x"}}, 422, ""),
    ("POST", "/agents/assistant/a%00b", {"json": {"body": "x"}}, 422, ""),
    ("POST", "/agents/assistant/me", {"json": {"body": "x", "dispatchId": ""}}, 422, ""),
    ("POST", "/agents/assistant/me", {"json": {"body": "x", "resultRetries": -1}}, 422, ""),
    ("POST", "/agents/assistant/me", {"json": {"kind": "signal"}}, 422, "invalid_dispatch"),
    ("POST", "/agents/assistant/me", {"json": {"attachments": [{"x": 1}]}}, 422, ""),
    ("POST", "/agents/assistant/me", {"json": None}, 415, "unsupported_media_type"),
    ("POST", "/agents/assistant/me", {"json": None, "headers": _JSON}, 422, "invalid_request"),
    ("POST", "/agents/assistant/me", {"params": {"wait": "maybe"}, "json": {}}, 422, ""),
    ("POST", "/agents/assistant/me", {"content": b"", "headers": _JSON}, 422, ""),
    ("POST", "/agents/assistant/me", {"content": b"\xef\xbb\xbf{}", "headers": _JSON}, 422, ""),
    ("POST", "/agents/assistant/me", {"content": b"NaN", "headers": _JSON}, 422, ""),
    (
        "POST",
        "/agents/assistant/me",
        {"content": b'{"body": "x", "resultSchema": {"a": NaN}}', "headers": _JSON},
        422,
        "",
    ),
    ("POST", "/agents/assistant/me/steer", {"json": {"body": ""}}, 422, "invalid_request"),
    ("POST", "/agents/assistant/me/steer", {"json": {"body": "x"}}, 409, ""),
    ("POST", "/agents/assistant/me/followup", {"json": {}}, 422, ""),
    ("POST", "/agents/assistant/me/abort", {"json": {"session": 3}}, 422, ""),
    ("POST", "/agents/nobody/me/compact", {"json": {}}, 404, "unknown_agent"),
    ("GET", "/agents/assistant/me/records", {"params": {"after": -1}}, 422, ""),
    ("GET", "/agents/assistant/me/records", {"params": {"limit": 0}}, 422, ""),
    ("GET", "/agents/assistant/me/records", {"params": {"limit": 10**6}}, 422, ""),
    ("GET", "/agents/assistant/me", {"params": {"after": "x"}}, 422, ""),
    ("GET", "/agents/assistant/me", {"headers": {"last-event-id": "-4"}}, 400, ""),
    ("GET", "/submissions/nope", {"params": {"wait": True}}, 404, ""),
    ("GET", "/approvals", {"params": {"status": "weird"}}, 422, ""),
    ("POST", "/approvals/nope", {"json": {"decision": "approve"}}, 404, ""),
    ("POST", "/approvals/c.x", {"json": {"decision": "maybe"}}, 422, ""),
    ("POST", "/approvals/c.x", {"json": {"decision": "approve"}}, 404, ""),
    ("POST", "/conversations/nope/fork", {"json": {"atSeq": 0}}, 422, ""),
    ("POST", "/conversations/nope/fork", {"json": {"atSeq": 1}}, 404, ""),
    ("GET", "/conversations/nope/verify", {}, 404, ""),
]


@pytest.mark.parametrize(("method", "path", "kwargs", "status", "type_"), BAD_REQUESTS)
async def test_bad_requests_anywhere_are_typed_and_change_nothing(
    asgi: Serve, method: str, path: str, kwargs: dict[str, Any], status: int, type_: str
) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    done = (await c.post("/agents/assistant/me", params={"wait": True}, json={"body": "hi"})).json()
    before = await server.store.read(done["conversationId"])
    submissions = await server.store.list_submissions()
    response = await c.request(method, path, **kwargs)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"] and (error["type"] == type_ or not type_), error
    assert await server.store.read(done["conversationId"]) == before
    assert await server.store.list_submissions() == submissions


async def test_waiting_on_a_parked_run_times_out_into_a_202(asgi: Serve) -> None:
    c = (await asgi(demo_agents())).client
    parked = await c.post(
        "/agents/assistant/me",
        params={"wait": True, "timeout": 0.3},
        json={"body": "email bob@example.com: hi"},
    )
    assert parked.status_code == 202 and "streamUrl" in parked.json()
    polled = await c.get(
        f"/submissions/{parked.json()['submissionId']}", params={"wait": True, "timeout": 0.2}
    )
    assert polled.status_code == 200 and polled.json()["status"] != "settled"


async def test_a_busy_session_rejects_and_a_failed_run_still_answers_200(asgi: Serve) -> None:
    c = (await asgi(demo_agents())).client
    await c.post("/agents/assistant/me", json={"body": "research tides"})
    busy = await c.post(
        "/agents/assistant/me", params={"multitask": "reject"}, json={"body": "hello"}
    )
    assert busy.status_code == 409 and busy.json()["error"]["type"] == "session_busy"
    failed = await c.post(
        "/agents/assistant/other",
        params={"wait": True},
        json={"body": "hello", "resultSchema": {"not": {}}, "resultRetries": 0},
    )
    assert failed.status_code == 200, failed.text
    assert failed.json()["status"] == "failed" and failed.json()["errorCode"]


async def test_an_edited_approval_runs_with_the_new_args(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    body = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()

    async def pending() -> list[dict[str, Any]]:
        return list((await c.get("/approvals")).json()["approvals"])

    items = await until_appended(server, body["conversationId"], pending)
    edited = {"to": "ann@example.com", "text": "hello"}
    decided = await c.post(
        f"/approvals/{items[0]['approvalId']}", json={"decision": "edit", "args": edited}
    )
    assert decided.status_code == 200, decided.text
    info = (await c.get(f"/submissions/{body['submissionId']}", params={"wait": True})).json()
    assert "ann@example.com: hello" in info["settlement"]["result"]
    assert (await c.get("/approvals", params={"status": "completed"})).status_code == 422
