"""``PydanticAIModel`` over the real ``openai`` SDK, in process, against the fake OpenAI API on
127.0.0.1: the Responses API (``openai:``) and Chat Completions (``openai-chat:``), streamed
and whole. Text arrives as deltas, tool calls whose arguments were split over chunks arrive
whole, and the usage (cached and reasoning tokens included) is carried. One model serves
requests on successive event loops, as the model ``model_from_env`` shares per process may
(the fake closes every connection, so this shows no pooled connection crossing loops)."""

import asyncio
from collections.abc import Iterator

import pytest

from tether.messages import Message, ModelRequest, ToolCallPart, ToolSpec, Usage
from tether.models import StreamDelta
from tether.models.pydantic_ai import PydanticAIModel

from ..fakes.openai_server import Answer, Call, FakeOpenAI

EMAIL = ToolSpec(
    name="send_email",
    description="Send an email.",
    parameters={
        "type": "object",
        "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
        "required": ["to", "text"],
    },
)
ARGS = {"to": "bob@example.com", "text": "lunch at noon, by the fountain?"}
PATHS = {"openai:gpt-4.1-mini": "/v1/responses", "openai-chat:gpt-4.1-mini": "/v1/chat/completions"}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(chunk=5) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake")
        yield server


def ask(model: str) -> ModelRequest:
    messages = (Message.system("Be brief."), Message.user("email bob about lunch"))
    return ModelRequest(model=model, messages=messages, tools=(EMAIL,))


@pytest.mark.parametrize("name", sorted(PATHS))
async def test_streamed_text_tool_calls_and_usage(name: str, fake: FakeOpenAI) -> None:
    fake.add(
        Answer(text="Sending it.", calls=(Call("send_email", ARGS),), cached_tokens=64),
        Answer(text="Done.", reasoning_tokens=7, input_tokens=200, output_tokens=9),
    )
    model, deltas = PydanticAIModel(name), list[StreamDelta]()

    async def sink(delta: StreamDelta) -> None:
        deltas.append(delta)

    first = await model.request(ask(name), sink)
    assert first.message.text == "Sending it."
    [call] = [p for p in first.message.parts if isinstance(p, ToolCallPart)]
    assert (call.name, call.args, call.call_id) == ("send_email", ARGS, "call_1_0")
    assert first.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens) == (120, 30)
    assert first.usage.cache_read_tokens == 64
    assert len(deltas) > 1 and "".join(d.text for d in deltas) == "Sending it."

    second = await model.request(ask(name), sink)
    assert second.message.text == "Done." and second.usage is not None
    assert second.usage == Usage(
        input_tokens=200,
        output_tokens=9,
        reasoning_tokens=7,
        cache_read_tokens=0,
        cache_write_tokens=0,
    )
    assert [r.path for r in fake.requests] == [PATHS[name]] * 2
    assert all(r.stream for r in fake.requests)


@pytest.mark.parametrize("name", sorted(PATHS))
async def test_whole_responses(name: str, fake: FakeOpenAI) -> None:
    fake.add(Answer(text="Sending it.", calls=(Call("send_email", ARGS),)))
    response = await PydanticAIModel(name, stream=False).request(ask(name))
    assert response.message.text == "Sending it." and response.message.tool_calls
    assert not fake.requests[0].stream


@pytest.mark.parametrize("name", sorted(PATHS))
def test_one_model_on_successive_event_loops(name: str, fake: FakeOpenAI) -> None:
    fake.add(Answer(text="one"), Answer(text="two"))
    model = PydanticAIModel(name)
    model.build()  # as tether serve's startup check does, outside any loop
    assert asyncio.run(model.request(ask(name))).message.text == "one"
    assert asyncio.run(model.request(ask(name))).message.text == "two"
    assert fake.count == 2
