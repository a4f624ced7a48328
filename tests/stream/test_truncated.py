"""The canonical stream of a truncated log: its ``log_truncated`` record gives the history it
carries as whole messages, so a reader of the session still sees the conversation."""

from tether.journal import SIGNAL_MEDIA_TYPE
from tether.messages import DataPart, Message, TextPart, ToolCallPart, ToolResultPart
from tether.records import LogTruncated, RecordDraft, seal
from tether.stream import project

HISTORY = [
    Message.user("what is the weather?"),
    Message(
        role="assistant",
        parts=(
            TextPart(text="let me look"),
            ToolCallPart(call_id="c1", name="forecast", args={"city": "Paris"}),
        ),
    ),
    Message(role="tool", parts=(ToolResultPart(call_id="c1", content="sunny"),)),
    Message(role="user", parts=(DataPart(data={"type": "ping"}, media_type=SIGNAL_MEDIA_TYPE),)),
]


def test_the_anchor_streams_the_history_it_carries() -> None:
    anchor = LogTruncated(
        last_hash="ab" * 32,
        truncated_at="2026-12-02T00:00:00.000000Z",
        removed=9,
        path=[2, 4, 6, 8],
        parents=[None, 2, 4, 6],
        groups=[(2, 1), (4, 1), (6, 1), (8, 1)],
        messages=HISTORY,
    )
    record = seal(RecordDraft(anchor), conversation_id="c", session="s", seq=9, prev_hash="")
    events = [event.model_dump(mode="json", exclude_none=True) for event in project([record])]
    assert [event["type"] for event in events] == ["full"] * 5
    assert [event["index"] for event in events] == [0, 1, 2, 3, 4]
    contents = [event["content"] for event in events]
    assert (contents[0]["type"], contents[0]["author"], contents[0]["content"]) == (
        "text",
        "user",
        "what is the weather?",
    )
    assert (contents[1]["author"], contents[1]["content"]) == ("agent", "let me look")
    assert (contents[2]["type"], contents[2]["name"], contents[2]["arguments"]) == (
        "tool_request",
        "forecast",
        {"city": "Paris"},
    )
    assert (contents[3]["type"], contents[3]["name"], contents[3]["content"]) == (
        "tool_response",
        "forecast",
        "sunny",
    )
    assert contents[4]["data"] == {"kind": "signal", "type": "ping"}
