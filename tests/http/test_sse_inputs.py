"""A question a run asks (``Turn.ask``) and its answer, in the canonical stream as agentex's
own client reads it: data events, as an approval's are, between the call and its result."""

from typing import Any

import pytest

from tether.stream import project

from ..engine.agents import agent
from ..engine.test_inputs import NAME, AskOnce, pending_input
from ..engine.test_runtime import settle
from .conftest import Server

pytest.importorskip("agentex")

from agentex import AsyncAgentex, AsyncStream

STREAM = "/agents/ask/acme"


async def read(server: Server, **headers: str) -> list[Any]:
    async with AsyncAgentex(base_url=server.url, api_key=None, max_retries=0) as client:
        stream = await client.get(
            STREAM,
            cast_to=object,
            options={"params": {"view": "stream"}, "headers": headers},
            stream=True,
            stream_cls=AsyncStream[object],
        )
        return [event async for event in stream]


async def expected(server: Server, conversation_id: str) -> list[dict[str, Any]]:
    records = await server.store.read(conversation_id)
    return [e.model_dump(mode="json", exclude_none=True) for e in project(records)]


def data(events: list[Any]) -> list[dict[str, Any]]:
    return [e["content"]["data"] for e in events if e["content"]["type"] == "data"]


async def test_a_question_and_its_answer_are_data_events(serve: Any) -> None:
    server: Server = await serve({"ask": agent(AskOnce())})
    receipt = await server.runtime.dispatch("ask", "acme", "hello")
    input_id = await pending_input(server.runtime, receipt.submission_id)

    waiting = await read(server)  # parked for a person is at rest: the stream ends
    assert waiting == await expected(server, receipt.conversation_id)
    request, asked = waiting[-2:]
    assert request["content"]["type"] == "tool_request" and request["content"]["name"] == "ask"
    assert asked["type"] == "full" and asked["content"]["author"] == "agent"
    assert asked["content"]["data"] == {
        "kind": "input_requested",
        "inputId": input_id,
        "callId": "ask-1",
        "tool": "ask",
        "args": {},
        "prompt": "What is your name?",
        "answerSchema": NAME,
    }

    await server.runtime.answer(input_id, "Ann", responder="ann")
    assert (await settle(server.runtime, receipt.submission_id))["result"] == "Ann"
    whole = await read(server)
    assert whole == await expected(server, receipt.conversation_id)
    assert whole[: len(waiting)] == waiting  # the same events, the same indexes
    answered = next(
        e for e in whole if e["content"].get("data", {}).get("kind") == "input_answered"
    )
    assert answered["content"]["author"] == "user"
    assert answered["content"]["data"] == {
        "kind": "input_answered",
        "inputId": input_id,
        "callId": "ask-1",
        "value": "Ann",
        "responder": "ann",
    }
    result = whole[whole.index(answered) + 1]
    assert result["content"]["type"] == "tool_response"
    assert (result["content"]["tool_call_id"], result["content"]["content"]) == ("ask-1", "Ann")
    assert [d["kind"] for d in data(whole)] == [
        "input_requested",
        "input_answered",
        "submission_settled",
    ]

    # Resumed after the question (the id of its event), the rest reads the same.
    ids = [line async for line in _ids(server)]
    at = ids[len(waiting) - 1]
    assert await read(server, **{"Last-Event-ID": at}) == whole[len(waiting) :]


async def _ids(server: Server) -> Any:
    async with server.client.stream("GET", STREAM, params={"view": "stream"}) as response:
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                yield line.removeprefix("id: ")
