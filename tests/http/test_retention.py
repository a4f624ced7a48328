"""A truncated session over HTTP (issue 22, item 3): it verifies from its anchor, forks from
it on (410 before), and its stream still gives the whole conversation."""

from collections.abc import Callable
from typing import Any

import orjson

from tether.engine import Retention

from ..engine.agents import echo_agent
from .conftest import Server
from .test_openapi import Checked, _document

Serve = Callable[..., Any]


async def _talked(server: Server, turns: int) -> str:
    conversation_id = ""
    for n in range(turns):
        answer = await server.client.post(
            "/agents/echo/acme", params={"wait": True}, json={"body": f"message {n}"}
        )
        assert answer.status_code == 200, answer.text
        conversation_id = answer.json()["conversationId"]
    return conversation_id


async def test_a_truncated_session_verifies_forks_and_streams(asgi: Serve) -> None:
    server: Server = await asgi({"echo": echo_agent()})
    call = Checked(server.client, _document())
    cid = await _talked(server, 6)
    [outcome] = (await server.runtime.prune(Retention(keep_records=8))).outcomes
    assert outcome.through_seq is not None
    cut, head = outcome.through_seq, outcome.records

    verified = (await call("GET", f"/conversations/{cid}/verify")).json()
    assert verified == {"conversationId": cid, "ok": True, "records": head, "firstSeq": cut}

    early = await call("POST", f"/conversations/{cid}/fork", json={"atSeq": cut - 1})
    assert early.status_code == 410
    error = early.json()["error"]
    assert error["type"] == "seq_truncated" and f"starts at {cut}" in error["message"]
    late = await call("POST", f"/conversations/{cid}/fork", json={"atSeq": cut})
    assert late.status_code == 201, late.text

    *exported, trailer = (
        await server.client.get(f"/conversations/{cid}/export")
    ).content.splitlines()
    first = orjson.loads(exported[0])
    assert (first["kind"], first["seq"], len(exported)) == ("log_truncated", cut, head - cut + 1)
    assert orjson.loads(trailer)["records"] == len(exported)

    texts: list[str] = []
    async with server.client.stream(
        "GET", "/agents/echo/acme", params={"view": "stream", "follow": False}
    ) as stream:
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                event = orjson.loads(line[6:])
                content = event.get("content") or {}
                if content.get("type") == "text":
                    texts.append(content["content"])
    said = [f"message {n}" for n in range(6)]
    assert [text for text in texts if text.startswith("message")] == said
    assert len([text for text in texts if text.startswith("echo: ")]) == 6
