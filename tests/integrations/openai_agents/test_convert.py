"""Responses items ↔ neutral messages: what is neutral, what travels whole, what is hashed."""

from agents.items import ModelResponse as SdkResponse
from agents.items import TResponseOutputItem
from agents.usage import Usage
from openai.types.responses import ResponseFunctionWebSearch, ResponseReasoningItem
from openai.types.responses.response_function_web_search import ActionSearch
from openai.types.responses.response_reasoning_item import Summary

from tether.integrations.openai_agents._convert import (
    ITEM_MEDIA_TYPE,
    items_to_messages,
    messages_to_items,
    response_from_sdk,
    response_to_sdk,
)
from tether.messages import (
    DataPart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

from .scripted import call, text


def test_a_response_round_trips_through_the_neutral_message() -> None:
    reasoning = ResponseReasoningItem(
        id="rs_9",
        type="reasoning",
        summary=[Summary(type="summary_text", text="a"), Summary(type="summary_text", text="b")],
        encrypted_content="opaque",
    )
    search = ResponseFunctionWebSearch(
        id="ws_1",
        type="web_search_call",
        status="completed",
        action=ActionSearch(type="search", query="tides"),
    )
    output: list[TResponseOutputItem] = [reasoning, text("hi"), search, call("f", "{bad", "c1")]
    neutral = response_from_sdk(SdkResponse(output=output, usage=Usage(), response_id="r"))
    parts = neutral.message.parts
    assert [type(p).__name__ for p in parts] == [
        "ThinkingPart",
        "ThinkingPart",
        "TextPart",
        "DataPart",
        "ToolCallPart",
    ]
    assert parts[0] == ThinkingPart(text="a", id="rs_9", opaque="opaque", provider="openai")
    assert parts[4] == ToolCallPart(call_id="c1", name="f", args={"raw": "{bad"})
    assert isinstance(parts[3], DataPart) and parts[3].media_type == ITEM_MEDIA_TYPE
    back = response_to_sdk(neutral).output
    assert back[0] == reasoning
    assert back[2] == search
    assert back[3].arguments == "{bad"  # type: ignore[union-attr]
    again = response_from_sdk(SdkResponse(output=back, usage=Usage(), response_id=None))
    assert again.message == neutral.message


def test_request_messages_leave_provider_ids_out() -> None:
    first = [{"role": "user", "content": "hi"}, {**text("x", "msg_a").model_dump(), "id": "a"}]
    second = [{"role": "user", "content": "hi"}, {**text("x", "msg_b").model_dump(), "id": "b"}]
    assert items_to_messages("sys", first) == items_to_messages("sys", second)  # type: ignore[arg-type]
    assert items_to_messages("sys", "hi") == (Message.system("sys"), Message.user("hi"))


def test_a_transcript_becomes_input_items() -> None:
    transcript = [
        Message.user("weather?"),
        Message(
            role="assistant",
            parts=(TextPart(text="on it"), ToolCallPart(call_id="c1", name="w", args={"a": 1})),
        ),
        Message(role="tool", parts=(ToolResultPart(call_id="c1", content="sunny"),)),
    ]
    items = messages_to_items(transcript)
    kinds = [item.get("type", item.get("role")) for item in items]
    assert kinds == ["user", "message", "function_call", "function_call_output"]
    assert items[2]["arguments"] == '{"a":1}'  # type: ignore[typeddict-item]
