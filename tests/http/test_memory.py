"""Memory stays flat (issue 18, item 7): no waiter outlives its request, and the view and SSE
caches are bounded by the bytes they hold, not only by count. Counted, not measured by RSS
(``benchmarks/soak.py`` measures that)."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tether import messages
from tether.demo import demo_agents
from tether.engine import Runtime
from tether.http._sse import RecentRecords
from tether.messages import Message, ModelRequest
from tether.records import Record

from .conftest import Server

Serve = Callable[..., Any]


def _waiters(runtime: Runtime) -> int:
    return runtime._runs.waiters


async def test_waiting_on_an_unknown_submission_leaves_no_waiter(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    for n in range(20):
        response = await server.client.get(f"/submissions/nope-{n}", params={"wait": True})
        assert response.status_code == 404
    assert _waiters(server.runtime) == 0


async def test_waits_on_an_api_only_node_leave_no_waiter(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), worker=False)
    c = server.client
    for n in range(10):  # nothing runs here: every wait times out into a 202
        accepted = await c.post(
            f"/agents/assistant/s{n}", params={"wait": True, "timeout": 0.05}, json={"body": "x"}
        )
        assert accepted.status_code == 202
        polled = await c.get(
            f"/submissions/{accepted.json()['submissionId']}",
            params={"wait": True, "timeout": 0.05},
        )
        assert polled.json()["status"] == "queued"
    assert _waiters(server.runtime) == 0


async def test_settled_and_concurrent_waits_leave_no_waiter(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    accepted = (await c.post("/agents/assistant/me", json={"body": "hello"})).json()
    waits = [
        c.get(f"/submissions/{accepted['submissionId']}", params={"wait": True}) for _ in range(5)
    ]
    answers = await asyncio.gather(*waits)
    assert all(a.json()["status"] == "settled" for a in answers)
    for _ in range(5):
        await c.post("/agents/assistant/me", params={"wait": True}, json={"body": "hi"})
    assert _waiters(server.runtime) == 0


async def test_a_timed_out_in_process_wait_leaves_no_waiter(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    runtime = server.runtime
    accepted = await runtime.dispatch("assistant", "me", "email bob@example.com: hi")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await runtime.wait(accepted.submission_id)  # parked for approval: never settles
    assert _waiters(runtime) == 0


async def test_the_view_cache_is_bounded_by_bytes(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    runtime = server.runtime
    runtime.view_cache_bytes = 6000  # a session's chat turn is about 2-3 kB of records
    for turn in range(3):  # sessions in turn: each view is dropped and read again (lean)
        for n in range(8):
            await server.client.post(
                f"/agents/assistant/s{n}", params={"wait": True}, json={"body": f"hi {turn}"}
            )
    # What the kept views hold now, however they grew since they were handed out.
    sizes = [
        sum(len(r.canonical) for r in view.records if isinstance(r, Record))
        for view in runtime.views.held()
    ]
    assert 1 <= len(sizes) < 8
    assert sum(sizes) <= runtime.view_cache_bytes + 2 * max(sizes), sizes
    runtime.view(next(iter(runtime.views)))  # a recount: the books match what is held
    held = sum(
        len(r.canonical) for v in runtime.views.held() for r in v.records if isinstance(r, Record)
    )
    assert abs(runtime.views.bytes - held) <= 64 * sum(len(v.records) for v in runtime.views.held())


def test_remembered_histories_are_bounded_by_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each remembered history holds all its messages: a count bound alone let them grow. A
    # bound of a thousand messages shows it as well as the real one, at a 20th of the hashing.
    monkeypatch.setattr(messages._hashed, "messages", 1_000)
    assert 40 < messages._hashed.entries  # the histories' count alone would keep every one
    for n in range(40):
        history = tuple(Message.user(f"conversation {n}, message {i}") for i in range(100))
        ModelRequest(model="m", messages=history).input_hash()
        assert messages._hashed.held <= 1_000
    assert sum(messages._hashed.entries_held()) == messages._hashed.held <= 1_000


async def test_the_sse_recent_records_are_bounded_by_bytes(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    conversations = []
    for n in range(8):
        done = await c.post(
            f"/agents/assistant/s{n}", params={"wait": True}, json={"body": "x" * 500}
        )
        conversations.append(done.json()["conversationId"])
    recent = RecentRecords(server.runtime, keep_bytes=3000, total_bytes=8000)
    for conversation_id in conversations:
        head = len(await server.store.read(conversation_id))
        page = await recent.read(conversation_id, after=0, head=head)
        assert [r.seq for r in page] == list(range(1, head + 1))  # a read gets it all
        assert recent.size <= 8000
    assert 1 <= len(recent) < len(conversations)
    # Only the newest records of each conversation are kept, at most keep_bytes of them.
    again = await recent.read(conversations[-1], after=0, head=1)
    assert again[0].seq == 1  # not held any more: read from the store
