"""LangChain ↔ neutral messages: stable hashes, and what the graph gets back is what it gave."""

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata

from tether.integrations.langgraph._convert import (
    from_langchain,
    response_from_ai,
    to_ai_message,
    to_langchain,
)
from tether.messages import (
    Message,
    ModelRequest,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

USAGE: UsageMetadata = {
    "input_tokens": 9,
    "output_tokens": 4,
    "total_tokens": 13,
    "input_token_details": {"cache_read": 3, "cache_creation": 1},
    "output_token_details": {"reasoning": 2},
}


def test_an_answer_round_trips_with_reasoning_tool_ids_and_usage() -> None:
    blocks: list[str | dict[str, Any]] = [
        {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
        {"type": "text", "text": "let me look"},
    ]
    native = AIMessage(
        content=blocks,
        id="provider-id",
        tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "call_7", "type": "tool_call"}],
        usage_metadata=USAGE,
        response_metadata={"finish_reason": "tool_calls"},
    )
    response = response_from_ai(native)
    [thinking, text, call] = response.message.parts
    assert isinstance(thinking, ThinkingPart) and thinking.signature == "c2ln"
    assert text == TextPart(text="let me look")
    assert isinstance(call, ToolCallPart) and call.call_id == "call_7"
    assert response.finish_reason == "tool_calls"
    assert response.usage is not None and response.usage.cache_read_tokens == 3
    back = to_ai_message(response.message, usage=response.usage)
    assert back.content == blocks
    assert back.tool_calls == native.tool_calls
    assert back.usage_metadata == USAGE


def test_a_missing_tool_call_id_is_minted_once_then_kept() -> None:
    native = AIMessage(content="", tool_calls=[{"name": "t", "args": {}, "id": None}])
    [call] = response_from_ai(native).message.parts
    assert isinstance(call, ToolCallPart) and call.call_id.startswith("call_")


def test_ids_and_metadata_do_not_reach_the_hash() -> None:
    def request(suffix: str) -> ModelRequest:
        messages = [
            SystemMessage("be brief", id=f"s-{suffix}"),
            HumanMessage("hi", id=f"h-{suffix}"),
            AIMessage("hello", id=f"a-{suffix}", response_metadata={"at": suffix}),
        ]
        return ModelRequest(model="m", messages=tuple(from_langchain(messages)))

    assert request("1").input_hash() == request("2").input_hash()


def test_a_transcript_round_trips_through_langchain() -> None:
    transcript = [
        Message.system("be brief"),
        Message.user("tides?"),
        Message(
            role="assistant",
            parts=(ToolCallPart(call_id="c1", name="lookup", args={"topic": "tides"}),),
        ),
        Message(
            role="tool",
            parts=(ToolResultPart(call_id="c1", name="lookup", content="x", is_error=True),),
        ),
        Message.assistant("twice a day"),
    ]
    langchain = to_langchain(transcript)
    assert from_langchain(langchain) == transcript
    tool = langchain[3]
    assert isinstance(tool, ToolMessage) and tool.status == "error" and tool.tool_call_id == "c1"
