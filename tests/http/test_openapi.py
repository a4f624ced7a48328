"""``/openapi.json`` describes every route, every response body and every error envelope
(issue 20, item 6): the document is pinned (openapi_snapshot.json), and real answers are
checked against it.

After a deliberate change to the API, rewrite the snapshot and review its diff::

    TETHER_UPDATE_OPENAPI=1 .venv/bin/pytest tests/http/test_openapi.py

That also rewrites the TypeScript client's copy of the whole document
(``clients/typescript/openapi.json``); regenerate its types with ``npm run generate-types``
in ``clients/typescript``.
"""

import copy
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from jsonschema import Draft202012Validator

from tether.demo import demo_agents
from tether.engine import Runtime, WebhookSettings
from tether.http import create_app
from tether.store import MemoryStore, Store
from tether.wire import RecordsPage

from .conftest import Server, until_appended

Serve = Callable[..., Any]
SNAPSHOT = Path(__file__).with_name("openapi_snapshot.json")
# The whole document, which the TypeScript client's types are generated from (issue 43).
TYPESCRIPT_DOCUMENT = Path(__file__).parents[2] / "clients" / "typescript" / "openapi.json"
UPDATE = "TETHER_UPDATE_OPENAPI"
ENVELOPE = "#/components/schemas/ErrorEnvelope"
# Answered without a token (the console's sign-out too: it only clears a cookie).
OPEN = {("GET", "/healthz"), ("GET", "/readyz"), ("POST", "/ui/logout")}


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """The document does not depend on the store: the reference in-memory one serves."""
    yield MemoryStore()


def _document(**options: Any) -> dict[str, Any]:
    return create_app(Runtime(demo_agents(), "memory://"), **options).openapi()


def _operations(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{method.upper()} {path}": operation
        for path, methods in doc["paths"].items()
        for method, operation in methods.items()
    }


def _named(schema: dict[str, Any]) -> str:
    """A schema by the component it refers to, else the shape it has."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    return json.dumps(schema, sort_keys=True)


def _answers(operation: dict[str, Any]) -> dict[str, str]:
    """Each documented status with what it answers: a component's name, or a media type."""
    answers = {}
    for status, response in operation["responses"].items():
        content = response.get("content", {})
        answers[status] = " | ".join(
            _named(media["schema"]) if kind == "application/json" else kind
            for kind, media in sorted(content.items())
        )
    return answers


def _component(schema: dict[str, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {}
    if "properties" in schema:
        described["properties"] = sorted(schema["properties"])
        described["required"] = sorted(schema.get("required", []))
    if "enum" in schema:
        described["enum"] = sorted(schema["enum"])
    return described


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    """What the snapshot pins: every operation's parameters, body and answers by status, and
    every component's properties (or enum)."""
    operations = {}
    for name, operation in sorted(_operations(doc).items()):
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        operations[name] = {
            "parameters": sorted(f"{p['in']}:{p['name']}" for p in operation.get("parameters", [])),
            "body": _named(body["schema"]) if body else None,
            "responses": _answers(operation),
        }
    schemas = {
        name: _component(schema) for name, schema in sorted(doc["components"]["schemas"].items())
    }
    return {"operations": operations, "schemas": schemas}


def _differences(pinned: dict[str, Any], now: dict[str, Any]) -> list[str]:
    lines = []
    for part in ("operations", "schemas"):
        for name in sorted(pinned[part].keys() | now[part].keys()):
            was, is_ = pinned[part].get(name), now[part].get(name)
            if was != is_:
                lines.append(f"  {part[:-1]} {name}:\n    pinned {was}\n    now    {is_}")
    return lines


def test_the_openapi_document_is_pinned() -> None:
    now = summary(_document())
    if os.environ.get(UPDATE):
        SNAPSHOT.write_text(json.dumps(now, indent=2, sort_keys=True) + "\n")
    pinned = json.loads(SNAPSHOT.read_text())
    differences = _differences(pinned, now)
    assert not differences, (
        "the HTTP API's OpenAPI document changed:\n"
        + "\n".join(differences)
        + f"\nIf that is meant, rewrite {SNAPSHOT.name} with {UPDATE}=1 and review its diff."
    )


def test_the_typescript_clients_copy_of_the_document_is_the_servers() -> None:
    """``clients/typescript/openapi.json`` is the document its ``src/schema.ts`` is generated
    from (``npm run check-types`` checks that part): a route changed here fails until both
    are rewritten."""
    now = json.dumps(_document(), indent=2, sort_keys=True) + "\n"
    if os.environ.get(UPDATE):
        TYPESCRIPT_DOCUMENT.write_text(now)
    assert TYPESCRIPT_DOCUMENT.read_text() == now, (
        f"{TYPESCRIPT_DOCUMENT} is not the server's OpenAPI document: rewrite it with {UPDATE}=1, "
        "then run `npm run generate-types` in clients/typescript and commit both."
    )


def test_every_operation_documents_its_body_and_its_errors() -> None:
    doc = _document()
    assert len(_operations(doc)) == 46
    for name, operation in _operations(doc).items():
        responses = operation["responses"]
        successes = {status: r for status, r in responses.items() if status.startswith("2")}
        assert successes, name
        for status, response in successes.items():
            if status == "204":  # no content, by definition (useChat's resume: no run going)
                continue
            content = response.get("content", {})
            assert content, f"{name} {status} documents no body"
            for kind, media in content.items():
                if kind in ("text/event-stream", "application/x-ndjson"):
                    continue  # a stream: its frames (records, events) are documented apart
                if kind == "text/plain" and name == "GET /metrics":
                    continue  # Prometheus's text format, documented in docs/metrics.md
                assert kind == "application/json", (name, status, kind)
                assert media["schema"].get("$ref"), f"{name} {status}: no response model"
        errors = {status: r for status, r in responses.items() if int(status) >= 400}
        assert "500" in errors, name
        for status, response in errors.items():
            assert response["content"] == {"application/json": {"schema": {"$ref": ENVELOPE}}}, (
                name,
                status,
            )
        if operation.get("parameters") or operation.get("requestBody"):
            assert "422" in errors, f"{name} takes input but documents no 422"
        assert "401" not in errors, f"{name}: 401 only when auth is on"
    # FastAPI's own 422 schema is not what this API answers with.
    assert not {"HTTPValidationError", "ValidationError"} & set(doc["components"]["schemas"])


def test_with_auth_every_route_but_the_health_checks_documents_401() -> None:
    for name, operation in _operations(_document(auth_token="s3cret")).items():
        method, path = name.split(" ")
        documented = "401" in operation["responses"]
        assert documented != ((method, path) in OPEN), name
        if documented:
            assert operation["responses"]["401"]["content"]["application/json"]["schema"] == {
                "$ref": ENVELOPE
            }


def _strict(doc: dict[str, Any]) -> dict[str, Any]:
    """The document's schemas, closed: an object with documented properties admits no
    others (the models leave extra keys open; the server must not send any)."""
    strict = copy.deepcopy(doc)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(strict["components"])
    return strict


class Checked:
    """A client whose every answer is checked against the document: its status documented
    for the operation, its body valid against the schema documented for that status."""

    def __init__(self, client: httpx.AsyncClient, doc: dict[str, Any]) -> None:
        self.client = client
        self.doc = _strict(doc)
        self.seen: set[tuple[str, str]] = set()
        self.templates = [
            (method.upper(), path) for path, methods in doc["paths"].items() for method in methods
        ]

    def _operation(self, method: str, url: str) -> tuple[str, dict[str, Any]]:
        parts = url.split("?")[0].strip("/").split("/")
        for template_method, template in self.templates:
            pattern = template.strip("/").split("/")
            if template_method == method and len(pattern) == len(parts):
                if all(
                    p.startswith("{") or p == part for p, part in zip(pattern, parts, strict=True)
                ):
                    return template, self.doc["paths"][template][method.lower()]
        raise AssertionError(f"{method} {url} is not a documented operation")

    async def __call__(self, method: str, url: str, **options: Any) -> httpx.Response:
        response = await self.client.request(method, url, **options)
        template, operation = self._operation(method, url)
        documented = operation["responses"].get(str(response.status_code))
        assert documented, f"{method} {template} answered {response.status_code}: undocumented"
        if response.status_code == 204:
            assert not response.content and "content" not in documented
            self.seen.add((method, template))
            return response
        kind = response.headers["content-type"].split(";")[0]
        assert kind in documented["content"], (method, template, kind)
        if kind == "application/json":
            schema = {**documented["content"][kind]["schema"], "components": self.doc["components"]}
            errors = sorted(
                Draft202012Validator(schema).iter_errors(response.json()), key=lambda e: e.path
            )
            assert not errors, (method, url, response.status_code, [str(e) for e in errors])
        self.seen.add((method, template))
        return response


async def test_every_answer_keeps_to_the_documented_schemas(
    asgi: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every operation answers, in success and in failure, with what the document says."""
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "30")  # until aborted: steered meanwhile
    hooks = WebhookSettings(secret="whsec", allow=["127.0.0.0/8"])
    server: Server = await asgi(demo_agents(), settings={"webhook_settings": hooks})
    call = Checked(server.client, _document())
    me = "/agents/assistant/me"

    assert (await call("GET", "/healthz")).status_code == 200
    assert (await call("GET", "/readyz")).status_code == 200
    accepted = (await call("POST", me, json={"body": "hello"})).json()
    waited = await call("GET", f"/submissions/{accepted['submissionId']}", params={"wait": True})
    assert waited.json()["status"] == "settled"
    settled = await call("POST", me, params={"wait": True}, json={"body": "what time is it?"})
    assert settled.status_code == 200
    failed = await call(
        "POST",
        "/agents/assistant/failing",
        params={"wait": True},
        json={"body": "hi", "resultSchema": {"not": {}}, "resultRetries": 0},
    )
    assert failed.json()["status"] == "failed"
    parked = await call(
        "POST",
        me,
        params={"wait": True, "timeout": 0.3},
        json={"body": "email bob@example.com: hi"},
    )
    assert parked.status_code == 202 and parked.json()["status"]

    async def pending() -> list[dict[str, Any]]:
        return list((await call("GET", "/approvals")).json()["approvals"])

    [gate] = await until_appended(server, accepted["conversationId"], pending)
    edit = {"decision": "edit", "args": {"to": "ann@example.com", "text": "yo"}, "reason": "r"}
    assert (await call("POST", f"/approvals/{gate['approvalId']}", json=edit)).status_code == 200
    await call("GET", f"/submissions/{parked.json()['submissionId']}", params={"wait": True})
    assert (await call("GET", "/approvals", params={"status": "all"})).json()["approvals"]
    assert (await call("GET", "/approvals", params={"cursor": "MTox"})).status_code == 422
    assert (await call("GET", f"{me}/records", params={"limit": 3})).status_code == 200
    assert (await call("GET", f"{me}/messages")).status_code == 200
    cid = accepted["conversationId"]
    assert (await call("GET", f"/conversations/{cid}/verify")).status_code == 200
    forked = await call("POST", f"/conversations/{cid}/fork", json={"atSeq": 3})
    assert forked.status_code == 201
    assert (await call("POST", f"/conversations/{cid}/fork", json={"atSeq": 0})).status_code == 422
    assert (await call("GET", me)).headers["content-type"].startswith("text/event-stream")
    assert (await call("GET", me, headers={"Last-Event-ID": "x"})).status_code == 400
    # The chat adapters (issue 43): AG-UI's run input, useChat's request.
    run = {"threadId": "chat", "runId": "r-1", "messages": [{"role": "user", "content": "hi"}]}
    assert (await call("POST", f"{me}/ag-ui", json=run)).status_code == 200
    assert (await call("POST", f"{me}/ag-ui", json={"threadId": "chat"})).status_code == 422
    chat = {"id": "chat", "messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    assert (await call("POST", f"{me}/ai-sdk", json=chat)).status_code == 200
    assert (await call("POST", f"{me}/ai-sdk", json={"id": "chat"})).status_code == 422
    assert (await call("GET", f"{me}/ai-sdk/chat/stream")).status_code == 204
    assert (await call("POST", f"{me}/steer", json={"body": "x"})).status_code == 409
    head = (await call("GET", f"{me}/records", params={"limit": 1000})).json()["next"]
    researching = (await call("POST", me, json={"body": "research tides"})).json()

    async def running() -> bool:
        records = (await call("GET", f"{me}/records", params={"after": head})).json()["records"]
        return any(r["kind"] == "tool_called" for r in records)

    await until_appended(server, cid, running)
    assert (await call("POST", f"{me}/steer", json={"body": "the moon"})).status_code == 200
    assert (await call("POST", f"{me}/followup", json={"body": "later"})).status_code == 200
    aborted = (await call("POST", f"{me}/abort", json={})).json()["aborted"]
    assert researching["submissionId"] in aborted
    assert (await call("POST", f"{me}/compact", json={})).status_code == 202
    assert (await call("POST", "/agents/nobody/me", json={"body": "x"})).status_code == 404
    assert (await call("GET", "/submissions/nope")).status_code == 404
    sid = accepted["submissionId"]
    assert (await call("GET", f"/submissions/{sid}/tree")).json()["children"] == []
    assert (await call("GET", "/submissions/nope/tree")).status_code == 404
    json_type = {"headers": {"content-type": "application/json"}}  # a POST without a body
    aborted = await call("POST", f"/submissions/{sid}/abort", **json_type)
    assert aborted.json()["status"] == "settled"
    assert (await call("POST", "/submissions/nope/abort", **json_type)).status_code == 404
    malformed = {"content": b"{", "headers": {"content-type": "application/json"}}
    assert (await call("POST", me, **malformed)).status_code == 400
    assert (await call("POST", me, json={"body": 7})).status_code == 422
    assert (await call("POST", "/approvals/nope", json={"decision": "approve"})).status_code == 404
    # An input listed and answered is checked in tests/http/test_inputs.py (the demo never asks).
    assert (await call("GET", "/inputs", params={"status": "all"})).json()["inputs"] == []
    assert (await call("POST", "/inputs/nope", json={"value": 1})).status_code == 404
    # A budget gate listed and decided is checked in tests/http/test_budget.py.
    assert (await call("GET", "/budgets", params={"status": "all"})).json()["budgets"] == []
    assert (await call("POST", "/budgets/nope", json={"decision": "reject"})).status_code == 404
    # A tenant's usage is checked in tests/http/test_usage.py.
    assert (await call("GET", "/usage", params={"tenant": "acme"})).status_code == 200
    assert (await call("GET", "/usage")).status_code == 422
    exported = await call("GET", f"/conversations/{cid}/export")
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert (await call("GET", "/conversations/nope/export")).status_code == 404
    listed = (await call("GET", "/sessions", params={"agent": "assistant"})).json()
    assert cid in {item["conversationId"] for item in listed["sessions"]}
    assert (await call("GET", "/sessions", params={"limit": 0})).status_code == 422
    merge_patch = {"content-type": "application/merge-patch+json"}
    patched = await call(
        "PATCH", f"{me}/metadata", content=b'{"customer": "acme", "tier": 2}', headers=merge_patch
    )
    assert patched.json()["metadata"] == {"customer": "acme", "tier": 2}
    assert (await call("PATCH", f"{me}/metadata", json={"x": {"y": 1}})).status_code == 422
    assert (await call("PATCH", f"{me}/metadata", json={"k" * 65: 1})).status_code == 422
    assert (
        await call("PATCH", f"{me}/metadata", params={"session": "none"}, json={"a": 1})
    ).status_code == 404
    found = await call("GET", "/sessions", params={"q": "hello", "metadata.customer": "acme"})
    assert [item["metadata"] for item in found.json()["sessions"]] == [patched.json()["metadata"]]
    fork_session = forked.json()["session"]
    erased = await call("DELETE", me, params={"session": fork_session})
    assert erased.json()["conversationId"] == forked.json()["conversationId"]
    assert (await call("DELETE", me, params={"session": fork_session})).status_code == 404
    every_hour = {"agent": "assistant", "instance": "me", "every": 3600, "body": "hi"}
    schedule = await call("POST", "/schedules", json=every_hour)
    assert schedule.status_code == 201
    assert (await call("POST", "/schedules", json={"agent": "assistant"})).status_code == 422
    assert (await call("GET", "/schedules")).status_code == 200
    assert (await call("DELETE", f"/schedules/{schedule.json()['id']}")).status_code == 200
    assert (await call("DELETE", "/schedules/nope")).status_code == 404
    # What the web console reads besides (issue 23): the agents, a session's head, its
    # spans and usage, and its sign-in.
    assert (await call("GET", "/agents")).json()["agents"]
    versions = (await call("GET", "/versions", params={"agent": "assistant"})).json()
    [newest] = [v for v in versions["versions"] if v["newestHere"]]
    upgrade = {"agent": "assistant", "fromVersion": "old", "toVersion": newest["version"]}
    assert (await call("POST", "/versions/upgrade", json=upgrade)).json() == {"moved": []}
    upgrade["toVersion"] = "nope"
    assert (await call("POST", "/versions/upgrade", json=upgrade)).status_code == 422
    assert (await call("GET", f"{me}/conversation")).json()["head"] > 0
    assert (await call("GET", f"{me}/conversation", params={"session": "x"})).status_code == 404
    assert (await call("GET", f"/conversations/{cid}/spans")).json()["spans"]
    assert (await call("GET", "/conversations/nope/spans")).status_code == 404
    assert (await call("GET", f"/conversations/{cid}/usage")).json()["usage"]["calls"] > 0
    assert (await call("GET", "/conversations/nope/usage")).status_code == 404
    assert (await call("GET", "/me")).json()["subject"] == "anonymous"
    assert "tether_submissions_admitted_total" in (await call("GET", "/metrics")).text
    assert (await call("POST", "/ui/login", json={"token": "t"})).status_code == 200
    assert (await call("POST", "/ui/login", json={})).status_code == 422
    assert (await call("POST", "/ui/logout", **json_type)).status_code == 200
    later = {"body": "later", "session": "later", "afterSeconds": 3600}
    scheduled = (await call("POST", me, json=later)).json()["submissionId"]
    opened = await call("GET", f"{me}/submissions", params={"session": "later"})
    assert [item["submissionId"] for item in opened.json()["submissions"]] == [scheduled]
    assert (await call("GET", f"{me}/submissions", params={"session": "x"})).status_code == 404
    # Outbound webhooks (issue 43): a held subscription listed, shown, not resendable.
    hooked = {**later, "callback": {"url": "http://127.0.0.1:9/hook"}}
    assert (await call("POST", me, json=hooked)).status_code == 202
    refused = {"body": "x", "callback": {"url": "http://10.0.0.1/hook"}}
    assert (await call("POST", me, json=refused)).status_code == 422
    [held] = (await call("GET", "/webhook-deliveries")).json()["deliveries"]
    assert (await call("GET", "/webhook-deliveries", params={"limit": 0})).status_code == 422
    assert (await call("GET", f"/webhook-deliveries/{held['id']}")).json()["status"] == "held"
    assert (await call("GET", "/webhook-deliveries/nope")).status_code == 404
    resend = f"/webhook-deliveries/{held['id']}/resend"
    assert (await call("POST", resend, json={})).status_code == 409
    assert (await call("POST", "/webhook-deliveries/nope/resend", json={})).status_code == 404
    assert set(call.templates) <= call.seen, set(call.templates) - call.seen


async def test_an_authenticated_refusal_keeps_to_the_documented_schema(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token="s3cret")
    call = Checked(server.client, _document(auth_token="s3cret"))
    assert (await call("GET", "/approvals")).status_code == 401
    assert (await call("POST", "/agents/assistant/me", json={"body": "x"})).status_code == 401
    assert (await call("GET", "/healthz")).status_code == 200
    assert (await call("POST", "/ui/login", json={"token": "wrong"})).status_code == 401
    json_type = {"content-type": "application/json"}
    assert (await call("POST", "/ui/logout", headers=json_type)).status_code == 200


async def test_a_refused_site_or_content_type_keeps_to_the_documented_schema(
    asgi: Serve,
) -> None:
    """421 (a Host the server does not answer to), 403 (a change from another site's page)
    and 415 (a POST that does not say JSON) are documented where they can be answered."""
    server: Server = await asgi(demo_agents(), auth_token="s3cret")
    call = Checked(server.client, _document(auth_token="s3cret"))
    bearer = {"Authorization": "Bearer s3cret"}
    rebound = {**bearer, "Host": "rebound.example"}
    assert (await call("GET", "/approvals", headers=rebound)).status_code == 421
    assert (
        await call("POST", "/ui/login", json={"token": "x"}, headers=rebound)
    ).status_code == 421
    foreign = {**bearer, "Origin": "https://evil.example", "content-type": "application/json"}
    for method, path in (
        ("POST", "/agents/assistant/me"),
        ("POST", "/agents/assistant/me/abort"),
        ("POST", "/submissions/nope/abort"),
        ("DELETE", "/agents/assistant/me"),
        ("DELETE", "/schedules/nope"),
        ("POST", "/ui/logout"),
    ):
        assert (await call(method, path, headers=foreign)).status_code == 403, (method, path)
    for path in ("/agents/assistant/me/abort", "/submissions/nope/abort", "/ui/logout"):
        assert (await call("POST", path, headers=bearer)).status_code == 415, path


async def test_a_page_of_records_written_from_their_stored_bytes_says_what_its_model_does(
    asgi: Serve,
) -> None:
    """``RecordsPage.to_json`` sends each record's stored bytes rather than the model's own
    dump: the two must be the same JSON."""
    server: Server = await asgi(demo_agents())
    done = (
        await server.client.post("/agents/assistant/me", params={"wait": True}, json={"body": "hi"})
    ).json()
    records = await server.runtime.records(done["conversationId"])
    page = RecordsPage(conversation_id=done["conversationId"], records=records, next=3)
    assert orjson.loads(page.to_json()) == orjson.loads(page.model_dump_json())
    served = await server.client.get("/agents/assistant/me/records")
    assert served.json() == {**orjson.loads(page.to_json()), "next": len(records)}
