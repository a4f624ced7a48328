"""The routes the console reads beyond the records (issue 23, items 2 and 5): the agents, a
session's conversation and head, the spans derived from its log, its usage."""

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tether.demo import demo_agents, demo_subagents
from tether.http._spans import SpanBuilder
from tether.messages import Message, Usage
from tether.records import (
    AssistantMessageCompleted,
    AssistantMessageStarted,
    AssistantTextDelta,
    ExecutionEnded,
    ExecutionStarted,
    ModelCalled,
    Payload,
    Record,
    RecordDraft,
    seal,
)
from tether.store import MemoryStore, Store

from .conftest import Server, until_appended
from .test_openapi import Checked, _document

Serve = Callable[..., Any]
ME = "/agents/assistant/me"


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.1")


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """What these routes derive is the same on every store: the in-memory one serves."""
    yield MemoryStore()


async def _started(asgi: Serve) -> tuple[Server, Checked]:
    server: Server = await asgi(demo_agents(), settings={"subagents": demo_subagents()})
    return server, Checked(server.client, _document())


async def test_the_agents_are_listed_with_whom_they_delegate_to(asgi: Serve) -> None:
    _, call = await _started(asgi)
    agents = (await call("GET", "/agents")).json()["agents"]
    assert [agent["name"] for agent in agents] == ["assistant", "researcher"]
    assert agents[0]["delegatesTo"] == ["researcher"] and "description" not in agents[0]
    assert agents[1]["delegatesTo"] == [] and "slow research tool" in agents[1]["description"]


async def test_a_sessions_conversation_names_its_head(asgi: Serve) -> None:
    server, call = await _started(asgi)
    missing = await call("GET", f"{ME}/conversation", params={"session": "new"})
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "conversation_not_found"
    assert (await call("GET", "/agents/nobody/me/conversation")).status_code == 404
    done = (await call("POST", ME, params={"wait": True}, json={"body": "hi"})).json()
    view = (await call("GET", f"{ME}/conversation")).json()
    records = await server.runtime.records(done["conversationId"])
    assert view["conversationId"] == done["conversationId"]
    assert view["head"] == len(records) == records[-1].seq
    assert view["streamUrl"] == "/agents/assistant/me?session=default" and "parent" not in view
    forked = (
        await call("POST", f"/conversations/{done['conversationId']}/fork", json={"atSeq": 3})
    ).json()
    child = (await call("GET", f"{ME}/conversation", params={"session": forked["session"]})).json()
    fork_records = await server.runtime.records(forked["conversationId"])
    assert child["head"] == fork_records[-1].seq > 3  # the prefix, and what the fork wrote
    assert child["parent"] == {"conversationId": done["conversationId"], "seq": 3, "reason": "fork"}


async def test_spans_are_the_executions_model_calls_and_tool_calls_of_the_log(
    asgi: Serve,
) -> None:
    server, call = await _started(asgi)
    done = (await call("POST", ME, params={"wait": True}, json={"body": "research tides"})).json()
    cid = done["conversationId"]
    spans = (await call("GET", f"/conversations/{cid}/spans")).json()
    assert spans["next"] is None
    shapes = [(s["kind"], s["name"], s["status"]) for s in spans["spans"]]
    assert shapes == [
        ("execution", "tether.agent", "ok"),
        ("model", "echo", "ok"),
        ("tool", "research", "ok"),
        ("model", "echo", "ok"),
    ]
    execution, model, tool, _ = spans["spans"]
    assert all(s["durationMs"] >= 0 and s["endSeq"] > s["startSeq"] for s in spans["spans"])
    assert execution["startSeq"] < model["startSeq"] < tool["startSeq"] < execution["endSeq"]
    assert tool["durationMs"] >= 100  # the research tool sleeps 0.1 s
    assert model["usage"]["calls"] == 1 and model["usage"]["inputTokens"] > 0
    assert tool["submissionId"] == done["submissionId"] and tool["callId"]
    paged = (await call("GET", f"/conversations/{cid}/spans", params={"limit": 2})).json()
    assert [s["startSeq"] for s in paged["spans"]] == [execution["startSeq"], model["startSeq"]]
    rest = (
        await call("GET", f"/conversations/{cid}/spans", params={"after": paged["next"]})
    ).json()
    assert [s["startSeq"] for s in rest["spans"]] == [s["startSeq"] for s in spans["spans"][2:]]
    assert (await call("GET", "/conversations/nope/spans")).status_code == 404
    assert (
        await call("GET", f"/conversations/{cid}/spans", params={"limit": 0})
    ).status_code == 422
    del server


async def test_a_gated_call_and_a_task_call_say_what_they_waited_for_and_spawned(
    asgi: Serve,
) -> None:
    server, call = await _started(asgi)
    parked = (
        await call(
            "POST", ME, params={"wait": True, "timeout": 0.2}, json={"body": "email a@b.c: hi"}
        )
    ).json()
    cid = parked["conversationId"]

    async def gate() -> list[dict[str, Any]]:
        return list((await call("GET", "/approvals")).json()["approvals"])

    [pending] = await until_appended(server, cid, gate)
    open_span = (await call("GET", f"/conversations/{cid}/spans")).json()["spans"][-1]
    assert open_span["kind"] == "tool" and open_span["status"] == "open"
    assert "endSeq" not in open_span and open_span["approvalId"] == pending["approvalId"]
    await call("POST", f"/approvals/{pending['approvalId']}", json={"decision": "reject"})
    await call("GET", f"/submissions/{parked['submissionId']}", params={"wait": True})
    asked = (
        await call(
            "POST", ME, params={"wait": True}, json={"body": "ask the researcher about tides"}
        )
    ).json()
    spans = (await call("GET", f"/conversations/{cid}/spans")).json()["spans"]
    email = next(s for s in spans if s["name"] == "send_email")
    assert (email["status"], email["decision"], email["approver"]) == ("denied", "reject", "api")
    task = next(s for s in spans if s["name"] == "task")
    child = (await call("GET", f"/submissions/{task['childSubmissionId']}")).json()
    assert child["parentSubmissionId"] == asked["submissionId"] == task["submissionId"]
    assert task["childConversationId"] == child["conversationId"]
    assert task["childStreamUrl"].startswith("/agents/researcher/me?session=task-")
    usage = (await call("GET", f"/conversations/{cid}/usage")).json()
    assert usage["usage"]["calls"] > 2 and usage["usage"]["cost"] == 0.0
    [researcher] = usage["children"]
    assert researcher["agent"] == "researcher" and researcher["usage"]["calls"] == 2
    assert researcher["submissionId"] == task["childSubmissionId"]
    assert (await call("GET", "/conversations/nope/usage")).status_code == 404


def _log(*payloads: tuple[Payload, float]) -> list[Record]:
    """Records of one execution, each ``seconds`` after the first."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    records: list[Record] = []
    for seq, (payload, seconds) in enumerate(payloads, 1):
        time = (start + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
        draft = RecordDraft(payload, submission_id="s", execution_id="e", time=time)
        prev = records[-1].hash if records else ""
        records.append(seal(draft, conversation_id="c", session="default", seq=seq, prev_hash=prev))
    return records


def test_a_stream_a_crash_cut_is_a_span_of_its_own() -> None:
    """The model's stream cut by a crash ends interrupted; asked again, it is a new span."""
    log = _log(
        (ExecutionStarted(harness="h", harness_version="1", input_count=1), 0),
        (ModelCalled(call_id="m", model="echo", input_hash="x"), 0.5),
        (AssistantMessageStarted(call_id="m", model="echo"), 0.6),
        (AssistantTextDelta(call_id="m", text="You sa"), 0.7),
        (
            AssistantMessageCompleted(
                call_id="m", message=Message.assistant("You sa"), interrupted=True
            ),
            5,
        ),
        (AssistantMessageStarted(call_id="m", model="echo"), 5.5),
        (
            AssistantMessageCompleted(
                call_id="m", message=Message.assistant("You said"), usage=Usage(output_tokens=2)
            ),
            6,
        ),
        (ExecutionEnded(output="You said"), 6.25),
    )
    builder = SpanBuilder(after=0)
    for record in log:
        builder.feed(record)
    assert [(s.kind, s.status, s.duration_ms) for s in builder.spans] == [
        ("execution", "ok", 6250.0),
        ("model", "interrupted", 4500.0),
        ("model", "ok", 500.0),
    ]
    assert builder.spans[2].usage is not None and builder.spans[2].usage.output_tokens == 2
    later = SpanBuilder(after=3)  # a page that starts inside the execution
    for record in log:
        later.feed(record)
    assert [(s.kind, s.start_seq) for s in later.spans] == [("model", 6)]
