"""The canonical types against agentex's own models (``agentex-client``, a test dependency)."""

from typing import Any

import pytest
from pydantic import TypeAdapter

from tether.stream import (
    DataContent,
    DataDelta,
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolRequestDelta,
    ToolResponseContent,
    ToolResponseDelta,
)

agentex_types = pytest.importorskip("agentex.types")
ours: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)
theirs: TypeAdapter[Any] = TypeAdapter(agentex_types.TaskMessageUpdate)

EVENTS: list[StreamEvent] = [
    StreamTaskMessageStart(content=TextContent(author="agent", content=""), index=0),
    StreamTaskMessageDelta(delta=TextDelta(text_delta="Hel"), index=0),
    StreamTaskMessageDone(index=0),
    StreamTaskMessageFull(
        content=ReasoningContent(author="agent", summary=["plan"], content=["think"]), index=1
    ),
    StreamTaskMessageDelta(
        delta=ReasoningContentDelta(content_index=0, content_delta="x"), index=1
    ),
    StreamTaskMessageDelta(
        delta=ReasoningSummaryDelta(summary_index=0, summary_delta="y"), index=1
    ),
    StreamTaskMessageFull(
        content=ToolRequestContent(
            author="agent", name="clock", tool_call_id="c1", arguments={"tz": "UTC", "n": [1, 2]}
        ),
        index=2,
    ),
    StreamTaskMessageDelta(
        delta=ToolRequestDelta(name="clock", tool_call_id="c1", arguments_delta='{"tz"'), index=2
    ),
    StreamTaskMessageFull(
        content=ToolResponseContent(
            author="agent", name="clock", tool_call_id="c1", content="12:00", is_error=False
        ),
        index=3,
    ),
    StreamTaskMessageDelta(
        delta=ToolResponseDelta(name="clock", tool_call_id="c1", content_delta="12"), index=3
    ),
    StreamTaskMessageFull(content=DataContent(author="user", data={"a": {"b": None}}), index=4),
    StreamTaskMessageDelta(delta=DataDelta(data_delta='{"a"'), index=4),
    StreamTaskMessageFull(
        content=TextContent(author="user", content="hi", format="markdown", style="active")
    ),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: f"{e.type}")
def test_agentex_reads_our_events_and_we_read_theirs(event: StreamEvent) -> None:
    wire = event.model_dump(mode="json", exclude_none=True)
    parsed = theirs.validate_python(wire)
    assert type(parsed).__name__ == type(event).__name__
    back = ours.validate_python(parsed.model_dump(mode="json"))
    assert back == event


def test_we_always_write_the_type_discriminators() -> None:
    updates = pytest.importorskip("agentex.types.task_message_update")
    bare = updates.StreamTaskMessageDelta(delta=agentex_types.TextDelta(text_delta="x"))
    assert bare.type is None and bare.delta.type is None  # agentex leaves them unset
    ours_wire = StreamTaskMessageDelta(delta=TextDelta(text_delta="x")).model_dump(mode="json")
    assert ours_wire["type"] == "delta" and ours_wire["delta"]["type"] == "text"
    reasoning = ReasoningContent(author="agent", summary=[]).model_dump(mode="json")
    assert reasoning["type"] == "reasoning"
