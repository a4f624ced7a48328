"""The canonical stream (agentex's ``TaskMessageUpdate`` shapes) and its projection from records.

Example::

    from tether.stream import project

    for event in project(await store.read(conversation_id)):
        print(event.type, event.index)
"""

from tether.stream._project import StreamProjector, project
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
    "Attachment",
    "Author",
    "DataContent",
    "DataDelta",
    "MessageContent",
    "MessageDelta",
    "ReasoningContent",
    "ReasoningContentDelta",
    "ReasoningSummaryDelta",
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
    "project",
)
