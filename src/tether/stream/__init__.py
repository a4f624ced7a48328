"""The canonical stream (agentex's ``TaskMessageUpdate`` shapes) and its projection from records.

Example::

    from tether.stream import project

    for event in project(await store.read(conversation_id)):
        print(event.type, event.index)
"""

from tether.stream._ag_ui import AgUiProjector
from tether.stream._ai_sdk import AiSdkProjector
from tether.stream._arguments import parse_tool_arguments
from tether.stream._emitter import SpanSink, UnifiedEmitter
from tether.stream._project import StreamProjector, project
from tether.stream._runs import RunProjector, WireEvent
from tether.stream._spans import CloseSpan, OpenSpan, SpanDeriver, SpanSignal
from tether.stream._tracer import SpanTracer, tool_attributes
from tether.stream._turn import HarnessTurn, TurnResult, TurnUsage
from tether.stream._types import (
    Attachment,
    Author,
    DataContent,
    DataDelta,
    MessageContent,
    MessageDelta,
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TaskMessage,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolRequestDelta,
    ToolResponseContent,
    ToolResponseDelta,
)

__all__ = (
    "AgUiProjector",
    "AiSdkProjector",
    "Attachment",
    "Author",
    "CloseSpan",
    "DataContent",
    "DataDelta",
    "HarnessTurn",
    "MessageContent",
    "MessageDelta",
    "OpenSpan",
    "ReasoningContent",
    "ReasoningContentDelta",
    "ReasoningSummaryDelta",
    "RunProjector",
    "SpanDeriver",
    "SpanSignal",
    "SpanSink",
    "SpanTracer",
    "StreamEvent",
    "StreamProjector",
    "StreamTaskMessageDelta",
    "StreamTaskMessageDone",
    "StreamTaskMessageFull",
    "StreamTaskMessageStart",
    "TaskMessage",
    "TextContent",
    "TextDelta",
    "ToolRequestContent",
    "ToolRequestDelta",
    "ToolResponseContent",
    "ToolResponseDelta",
    "TurnResult",
    "TurnUsage",
    "UnifiedEmitter",
    "WireEvent",
    "parse_tool_arguments",
    "project",
    "tool_attributes",
)
