"""Numbers at the boundary: a seq no store can hold, or written in non-ASCII digits, is a
typed 4xx, never a store's OverflowError (issue 18, item 4)."""

from collections.abc import Callable
from typing import Any

import pytest

from tether.demo import demo_agents
from tether.errors import InvalidSeq
from tether.store import MAX_SEQ

from .conftest import Server

Serve = Callable[..., Any]
STREAM = "/agents/assistant/me"
HUGE = str(2**63)
HUGER = "9" * 40
# Digits str.isdigit() accepts but a seq is never written in: superscripts, Arabic-Indic,
# fullwidth (spelled as escapes: they look like ASCII digits).
SUPER_1, SUPER_23, ARABIC_12, FULL_12 = "\u00b9", "\u00b2\u00b3", "\u0661\u0662", "\uff11\uff12"

# (method, path, request options, status): every route that takes a number.
CASES: list[tuple[str, str, dict[str, Any], int]] = [
    *[
        ("GET", path, {"params": {"after": value}}, 422)
        for path in (STREAM, f"{STREAM}/records")
        for value in (HUGE, HUGER, SUPER_1, ARABIC_12, FULL_12, "-1")
    ],
    ("GET", f"{STREAM}/records", {"params": {"limit": HUGE}}, 422),
    *[
        ("GET", STREAM, {"headers": {"Last-Event-ID": value.encode()}}, 400)
        for value in (HUGE, HUGER, SUPER_1, SUPER_23, ARABIC_12, FULL_12, "-1", "1e3", "0x10", "")
    ],
    *[
        (
            "GET",
            STREAM,
            {"params": {"view": "stream"}, "headers": {"Last-Event-ID": value.encode()}},
            400,
        )
        for value in (
            f"{HUGE}:0",
            f"1:{HUGE}",
            f"{SUPER_1}:0",
            f"1:{SUPER_23}",
            f"{ARABIC_12}:0",
            "0:0",
        )
    ],
    ("POST", "/conversations/{cid}/fork", {"json": {"atSeq": 2**63}}, 422),
    ("POST", "/conversations/{cid}/fork", {"json": {"atSeq": 10**40}}, 422),
    ("GET", "/submissions/x", {"params": {"wait": True, "timeout": "1e400"}}, 422),
    ("POST", STREAM, {"params": {"wait": True, "timeout": "nan"}, "json": {"body": "x"}}, 422),
]


async def test_out_of_range_numbers_are_typed_4xx_and_change_nothing(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    done = (await c.post(STREAM, params={"wait": True}, json={"body": "hi"})).json()
    before = await server.store.read(done["conversationId"])
    for method, path, options, status in CASES:
        response = await c.request(method, path.format(cid=done["conversationId"]), **options)
        assert response.status_code == status, (path, options, response.text)
        assert response.json()["error"]["message"]
    assert await server.store.read(done["conversationId"]) == before
    assert len(await server.store.list_submissions()) == 1


async def test_the_largest_seq_is_accepted(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    await c.post(STREAM, params={"wait": True}, json={"body": "hi"})
    records = await c.get(f"{STREAM}/records", params={"after": MAX_SEQ})
    assert records.status_code == 200 and records.json()["records"] == []
    stream = await c.get(STREAM, headers={"Last-Event-ID": str(MAX_SEQ)})
    assert stream.status_code == 200 and "id:" not in stream.text


async def test_the_runtime_checks_the_same_bound(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    done = (await server.client.post(STREAM, params={"wait": True}, json={"body": "hi"})).json()
    runtime, conversation_id = server.runtime, done["conversationId"]
    with pytest.raises(InvalidSeq) as raised:
        await runtime.records(conversation_id, after=2**63)
    assert raised.value.field == "after"
    with pytest.raises(InvalidSeq):
        await runtime.records(conversation_id, after=-1)
    with pytest.raises(InvalidSeq) as raised:
        await runtime.fork(conversation_id, at_seq=2**63)
    assert raised.value.field == "atSeq"
    assert await runtime.records(conversation_id, after=MAX_SEQ) == []
