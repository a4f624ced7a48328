"""The fake OpenAI API speaks the real protocol: every chunk and event it sends, and each whole
response, validates as the ``openai`` SDK's own types, strictly; it counts what it was sent."""

import json
import typing
from typing import Any

import httpx
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import BaseModel

from .openai_server import Answer, Call, FakeOpenAI

ANSWER = Answer(text="It is noon, by the clock.", calls=(Call("send_email", {"to": "a@b.c"}),))
# The Responses stream's event classes, by their ``type``: each event is validated as its own.
EVENTS: dict[str, type[BaseModel]] = {
    typing.get_args(member.model_fields["type"].annotation)[0]: member
    for member in typing.get_args(typing.get_args(ResponseStreamEvent)[0])
}


def _data(text: str) -> list[Any]:
    return [
        json.loads(line.removeprefix("data: "))
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_chat_completions_streamed_with_split_tool_calls_and_a_usage_chunk() -> None:
    with FakeOpenAI([ANSWER], chunk=4) as fake:
        body = {"model": "gpt-4.1-mini", "stream": True, "stream_options": {"include_usage": True}}
        sent = httpx.post(f"{fake.url}/chat/completions", json=body, timeout=30)
        assert sent.headers["content-type"] == "text/event-stream"
        assert sent.text.endswith("data: [DONE]\n\n")
        chunks = [ChatCompletionChunk.model_validate(c, strict=True) for c in _data(sent.text)]
        assert fake.count == 1 and fake.requests[0].stream
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER.text and len([c for c in chunks if c.choices]) > 3
    calls = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or ()]
    assert len(calls) > 2 and {call.index for call in calls} == {0}
    assert (
        calls[0].id == "call_1_0" and calls[0].function and calls[0].function.name == "send_email"
    )
    assert all(call.id is None for call in calls[1:])  # the id and name come once, first
    arguments = "".join(call.function.arguments or "" for call in calls if call.function)
    assert json.loads(arguments) == {"to": "a@b.c"}
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert not chunks[-1].choices and chunks[-1].usage and chunks[-1].usage.prompt_tokens == 120


def test_chat_completions_whole() -> None:
    with FakeOpenAI([ANSWER]) as fake:
        sent = httpx.post(f"{fake.url}/chat/completions", json={"model": "m"}, timeout=30)
    completion = ChatCompletion.model_validate(sent.json(), strict=True)
    message = completion.choices[0].message
    assert message.content == ANSWER.text and message.tool_calls
    assert completion.usage and completion.usage.completion_tokens == 30


def test_responses_streamed_and_whole() -> None:
    with FakeOpenAI([ANSWER, ANSWER]) as fake:
        streamed = httpx.post(
            f"{fake.url}/responses", json={"model": "m", "stream": True}, timeout=30
        )
        whole = httpx.post(f"{fake.url}/responses", json={"model": "m"}, timeout=30)
        assert fake.count == 2
    events: list[Any] = [
        EVENTS[e["type"]].model_validate(e, strict=True) for e in _data(streamed.text)
    ]
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    deltas = "".join(
        getattr(e, "delta", "") for e in events if e.type == "response.output_text.delta"
    )
    assert deltas == ANSWER.text
    assert [e.sequence_number for e in events] == list(range(len(events)))
    response = Response.model_validate(whole.json(), strict=True)
    assert response.output_text == ANSWER.text and response.usage
    assert response.usage.input_tokens == 120


def test_past_the_script_a_500_and_every_request_counted() -> None:
    with FakeOpenAI() as fake:
        sent = httpx.post(f"{fake.url}/chat/completions", json={"model": "m"}, timeout=30)
        assert sent.status_code == 500 and fake.count == 1


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_a_hanging_answer_stalls_until_released(path: str) -> None:
    with FakeOpenAI([Answer(text="abcdefghij", hang_after=2)], chunk=2) as fake:
        with httpx.stream(
            "POST", f"{fake.url}{path}", json={"model": "m", "stream": True}, timeout=30
        ) as streaming:
            assert fake.hung.wait(30)
            fake.release()
            text = "".join(streaming.iter_text())
    pieces = [c for c in _data(text) if "delta" in json.dumps(c)]
    assert "ab" in text and "cd" in text and "ef" not in text and pieces


@pytest.mark.parametrize(("status", "kind"), [(429, "requests"), (500, "server_error")])
def test_an_error_answer_has_openais_error_body(status: int, kind: str) -> None:
    with FakeOpenAI([Answer(status=status, retry_after="1")]) as fake:
        sent = httpx.post(f"{fake.url}/chat/completions", json={"model": "m"}, timeout=30)
        assert fake.count == 1
    assert sent.status_code == status and sent.headers["retry-after"] == "1"
    error = sent.json()["error"]
    assert error["type"] == kind and str(status) in error["message"]


def test_the_otherwise_answer_follows_the_script() -> None:
    with FakeOpenAI([Answer(text="one")], otherwise=Answer(status=503)) as fake:
        first, *rest = (
            httpx.post(f"{fake.url}/responses", json={"model": "m"}, timeout=30) for _ in range(3)
        )
        assert fake.count == 3
    assert first.status_code == 200 and [r.status_code for r in rest] == [503, 503]


def test_a_hang_sends_nothing_and_ends_when_the_client_hangs_up() -> None:
    with FakeOpenAI([Answer(hang=True), Answer(text="after")]) as fake:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{fake.url}/chat/completions", json={"model": "m"}, timeout=0.2)
        assert fake.hung.is_set()
        after = httpx.post(f"{fake.url}/chat/completions", json={"model": "m"}, timeout=30)
        assert after.json()["choices"][0]["message"]["content"] == "after"
