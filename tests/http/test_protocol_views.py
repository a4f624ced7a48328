"""``?view=ag-ui`` and ``?view=ai-sdk`` on a real server: every AG-UI event parses with the
``ag-ui-protocol`` package's models, both views resume at every cut with ``Last-Event-ID``
(no gap, no duplicate), and the chat adapters (``POST .../ag-ui``, ``POST .../ai-sdk``)
stream back the run of the message they sent."""

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from tether.demo import demo_agents
from tether.stream import AgUiProjector, AiSdkProjector, RunProjector

from .conftest import Server

Serve = Callable[..., Any]
STREAM = "/agents/assistant/me"
AG_UI = TypeAdapter[Any](Event)


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.3")


async def frames(
    response: httpx.Response,
) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """The events with an id, and the ``data`` of those without one."""
    with_id: list[tuple[str, dict[str, Any]]] = []
    bare: list[str] = []
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line and not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value
        elif "data" in fields:
            assert "event" not in fields  # a protocol's clients read data alone
            if "id" in fields:
                with_id.append((fields["id"], orjson.loads(fields["data"])))
            else:
                bare.append(fields["data"])
            fields = {}
    return with_id, bare


async def stream(
    client: httpx.AsyncClient, view: str, last_event_id: str | None = None
) -> tuple[list[tuple[str, dict[str, Any]]], list[str], httpx.Headers]:
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    params = {"view": view}
    async with client.stream("GET", STREAM, params=params, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        with_id, bare = await frames(response)
        return with_id, bare, response.headers


async def turns(server: Server) -> str:
    c = server.client
    for text in ("hello", "research tides", "email bob@example.com: hi"):
        await c.post(STREAM, params={"wait": True, "timeout": 1}, json={"body": text})
    return str((await c.get(f"{STREAM}/records")).json()["conversationId"])


async def expected(server: Server, conversation_id: str, projector: RunProjector) -> list[Any]:
    return [
        event
        for record in await server.store.read(conversation_id)
        for event in projector.feed(record)
    ]


async def test_the_ag_ui_view_is_the_protocols_and_resumes_at_every_cut(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    conversation_id = await turns(server)
    full, bare, _ = await stream(server.client, "ag-ui")
    assert bare == []  # a session's stream leaves a parked run open, to go on with
    assert [data for _, data in full] == await expected(server, conversation_id, AgUiProjector())
    for _, event in full:
        parsed = AG_UI.validate_python(event)
        assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == event
    kinds = [data["type"] for _, data in full]
    assert kinds.count("RUN_STARTED") == 3 and kinds.count("RUN_FINISHED") == 2
    assert {"TEXT_MESSAGE_CONTENT", "TOOL_CALL_RESULT", "CUSTOM"} <= set(kinds)
    for cut in range(1, len(full)):
        resumed, _, _ = await stream(server.client, "ag-ui", full[cut - 1][0])
        assert full[:cut] + resumed == full, cut
    bad = await server.client.get(STREAM, params={"view": "ag-ui"}, headers={"Last-Event-ID": "4"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_last_event_id"
    nested = await server.client.get(STREAM, params={"view": "ag-ui", "children": True})
    assert nested.status_code == 400 and nested.json()["error"]["type"] == "invalid_view"


async def test_the_ai_sdk_view_resumes_at_every_cut_and_ends_done(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    conversation_id = await turns(server)
    full, bare, headers = await stream(server.client, "ai-sdk")
    assert headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert bare == ["[DONE]"]
    assert [data for _, data in full] == await expected(server, conversation_id, AiSdkProjector())
    kinds = [data["type"] for _, data in full]
    assert kinds.count("start") == 3 and kinds.count("finish") == 2
    assert {"tool-input-available", "tool-output-available", "tool-approval-request"} <= set(kinds)
    for cut in range(1, len(full)):
        resumed, tail, _ = await stream(server.client, "ai-sdk", full[cut - 1][0])
        assert full[:cut] + resumed == full, cut
        assert tail == ["[DONE]"]


async def reply(
    client: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[str], httpx.Headers]:
    async with client.stream("POST", f"{STREAM}/{path}", json=body) as response:
        assert response.status_code == 200, await response.aread()
        with_id, bare = await frames(response)
        return [data for _, data in with_id], bare, response.headers


def ag_ui_input(thread: str, run: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "state": {},
        "messages": [{"id": f"{run}-u", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def test_an_ag_ui_run_input_dispatches_and_streams_its_run(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    events, bare, _ = await reply(c, "ag-ui", ag_ui_input("t-1", "r-1", "hello"))
    first = events
    assert bare == []
    for event in events:
        AG_UI.validate_python(event)
    assert events[0]["type"] == "RUN_STARTED" and events[0]["threadId"] == "t-1"
    assert events[-1]["type"] == "RUN_FINISHED" and "outcome" not in events[-1]
    assert not [e for e in events if e.get("role") == "user"]  # the client has it
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "You said: hello"
    # The second run of the thread is its own: the first one's events are not sent again.
    events, bare, _ = await reply(c, "ag-ui", ag_ui_input("t-1", "r-2", "email bob@x.org: hi"))
    assert [e["type"] for e in events].count("RUN_STARTED") == 1
    assert bare and orjson.loads(bare[-1])["outcome"]["type"] == "interrupt"
    interrupt = orjson.loads(bare[-1])["outcome"]["interrupts"][0]
    assert interrupt["reason"] == "approval"
    pending = (await c.get("/approvals", params={"status": "pending"})).json()["approvals"]
    assert [a["approvalId"] for a in pending] == [interrupt["id"]]
    AG_UI.validate_python(orjson.loads(bare[-1]))
    # The same runId again is the same submission (the dispatch id), not a second message.
    again, _, _ = await reply(c, "ag-ui", ag_ui_input("t-1", "r-1", "hello"))
    assert again == first


async def test_a_use_chat_request_dispatches_and_streams_its_message(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    body = {
        "id": "chat-1",
        "messages": [{"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}],
        "trigger": "submit-message",
    }
    parts, bare, headers = await reply(server.client, "ai-sdk", body)
    assert headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert bare == ["[DONE]"]
    assert [p["type"] for p in parts] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    records = await server.client.get(f"{STREAM}/records", params={"session": "chat-1"})
    assert records.status_code == 200


RESPONDED = {
    "type": "dynamic-tool",
    "state": "approval-responded",
    "approval": {"id": "c.2", "approved": True},
}
UNSAID = {"type": "dynamic-tool", "state": "approval-responded", "approval": {"id": "c.2"}}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("ag-ui", {"threadId": "t", "runId": "r", "messages": []}),
        ("ag-ui", {"threadId": "t", "messages": [{"role": "user", "content": "x"}]}),
        ("ai-sdk", {"id": "c", "messages": [{"role": "assistant", "parts": []}]}),
        ("ai-sdk", {"id": "c", "messages": [{"role": "user", "parts": [{"type": "file"}]}]}),
        ("ai-sdk", {"id": "c", "messages": [{"role": "assistant", "parts": [RESPONDED]}]}),
        ("ai-sdk", {"id": "c", "messages": [{"role": "assistant", "parts": [UNSAID]}]}),
        ("ag-ui", {"threadId": "t", "runId": "r", "messages": [], "resume": [{"x": 1}]}),
        (
            "ag-ui",
            {"threadId": "bad/name", "runId": "r", "messages": [{"role": "user", "content": "x"}]},
        ),
    ],
)
async def test_a_bad_chat_request_is_a_4xx_and_sends_nothing(
    serve: Serve, path: str, body: dict[str, Any]
) -> None:
    server: Server = await serve(demo_agents())
    response = await server.client.post(f"{STREAM}/{path}", json=body)
    assert 400 <= response.status_code < 500, response.text
    assert "error" in response.json()
    assert (await server.client.get("/sessions")).json()["sessions"] == []


async def test_a_resume_answers_the_interrupts_and_streams_the_run_on(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    _, bare, _ = await reply(c, "ag-ui", ag_ui_input("t-1", "r-1", "email bob@x.org: hi"))
    [interrupt] = orjson.loads(bare[-1])["outcome"]["interrupts"]
    resumed = {
        **ag_ui_input("t-1", "r-2", "email bob@x.org: hi"),
        "resume": [{"interruptId": interrupt["id"], "status": "resolved", "payload": True}],
    }
    events, bare, _ = await reply(c, "ag-ui", resumed)
    assert bare == []
    for event in events:
        AG_UI.validate_python(event)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert events[1]["name"] == "approval_decided" and events[1]["value"]["decision"] == "approve"
    assert "TOOL_CALL_START" not in kinds  # the call came with the run that parked
    assert "TOOL_CALL_RESULT" in kinds
    assert (await c.get("/approvals", params={"status": "pending"})).json()["approvals"] == []
    # Answering it again, or something that is not an interrupt of the thread, is a 4xx.
    for entry in (
        {"interruptId": interrupt["id"], "status": "cancelled"},
        {"interruptId": "nope.1", "status": "resolved"},
        {"interruptId": f"{interrupt['id'].rpartition('.')[0]}.1", "status": "resolved"},
    ):
        body = {**resumed, "resume": [entry]}
        response = await c.post(f"{STREAM}/ag-ui", json=body)
        assert 400 <= response.status_code < 500, response.text


async def test_use_chat_resume_streams_the_run_going_on_or_says_204(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    assert (await c.get(f"{STREAM}/ai-sdk/chat-1/stream")).status_code == 204
    email = {"type": "text", "text": "email bob@x.org: hi"}
    body = {"id": "chat-1", "messages": [{"id": "m-1", "role": "user", "parts": [email]}]}
    asked, _, _ = await reply(c, "ai-sdk", body)
    async with c.stream("GET", f"{STREAM}/ai-sdk/chat-1/stream") as response:
        assert response.status_code == 200
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        again, bare = await frames(response)
    assert [data for _, data in again] == asked and bare == ["[DONE]"]
    assert again[-1][1]["type"] == "tool-approval-request"
    [pending] = (await c.get("/approvals", params={"status": "pending"})).json()["approvals"]
    decided = {"decision": "approve", "approver": "ann"}
    await c.post(f"/approvals/{pending['approvalId']}", json=decided)
    async with asyncio.timeout(60):
        while (await c.get(f"{STREAM}/ai-sdk/chat-1/stream")).status_code != 204:
            await c.get(STREAM, params={"session": "chat-1"})  # until it settles
