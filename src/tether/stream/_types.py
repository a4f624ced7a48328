"""The canonical stream: agentex's ``TaskMessageUpdate`` shapes, field for field.

Field names are agentex's (snake_case) so an agentex client reads Tether's stream as its own.
Unlike agentex, every model here always carries its ``type`` discriminator (agentex defaults
it to ``None`` on several models), so a consumer can always tell the variants apart.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

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
)

Author = Literal["user", "agent"]
Style = Literal["static", "active"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- contents ------------------------------------------------------------------------------


class Attachment(_Model):
    file_id: str
    name: str
    size: int
    type: str
    """The MIME type."""


class TextContent(_Model):
    type: Literal["text"] = "text"
    author: Author
    content: str
    attachments: list[Attachment] | None = None
    format: Literal["markdown", "plain", "code"] = "plain"
    style: Style = "static"


class ReasoningContent(_Model):
    type: Literal["reasoning"] = "reasoning"
    author: Author
    summary: list[str]
    content: list[str] | None = None
    style: Style | None = None


class ToolRequestContent(_Model):
    type: Literal["tool_request"] = "tool_request"
    author: Author
    name: str
    tool_call_id: str
    arguments: dict[str, JsonValue]
    style: Style = "static"


class ToolResponseContent(_Model):
    type: Literal["tool_response"] = "tool_response"
    author: Author
    name: str
    tool_call_id: str
    content: JsonValue
    is_error: bool | None = None
    """``None`` when the harness reported no status."""
    style: Style = "static"


class DataContent(_Model):
    type: Literal["data"] = "data"
    author: Author
    data: dict[str, JsonValue]
    style: Style = "static"


MessageContent = Annotated[
    TextContent | ReasoningContent | ToolRequestContent | ToolResponseContent | DataContent,
    Field(discriminator="type"),
]

# --- deltas --------------------------------------------------------------------------------


class TextDelta(_Model):
    type: Literal["text"] = "text"
    text_delta: str | None = None


class DataDelta(_Model):
    type: Literal["data"] = "data"
    data_delta: str | None = None
    """A fragment of JSON text."""


class ToolRequestDelta(_Model):
    type: Literal["tool_request"] = "tool_request"
    name: str
    tool_call_id: str
    arguments_delta: str | None = None
    """A fragment of the arguments' JSON text."""


class ToolResponseDelta(_Model):
    type: Literal["tool_response"] = "tool_response"
    name: str
    tool_call_id: str
    content_delta: str | None = None


class ReasoningSummaryDelta(_Model):
    type: Literal["reasoning_summary"] = "reasoning_summary"
    summary_index: int
    summary_delta: str | None = None


class ReasoningContentDelta(_Model):
    type: Literal["reasoning_content"] = "reasoning_content"
    content_index: int
    content_delta: str | None = None


MessageDelta = Annotated[
    TextDelta
    | DataDelta
    | ToolRequestDelta
    | ToolResponseDelta
    | ReasoningSummaryDelta
    | ReasoningContentDelta,
    Field(discriminator="type"),
]

# --- events --------------------------------------------------------------------------------


class TaskMessage(_Model):
    """A stored message (agentex's persisted entity), as ``parent_task_message`` carries it."""

    content: MessageContent
    task_id: str
    id: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    streaming_status: Literal["IN_PROGRESS", "DONE"] | None = None


class StreamTaskMessageStart(_Model):
    """A message slot opens; deltas with the same ``index`` follow, then a Done."""

    type: Literal["start"] = "start"
    content: MessageContent
    index: int | None = None
    parent_task_message: TaskMessage | None = None


class StreamTaskMessageDelta(_Model):
    type: Literal["delta"] = "delta"
    delta: MessageDelta | None = None
    index: int | None = None
    parent_task_message: TaskMessage | None = None


class StreamTaskMessageFull(_Model):
    """A whole message in one event; its slot is complete at once."""

    type: Literal["full"] = "full"
    content: MessageContent
    index: int | None = None
    parent_task_message: TaskMessage | None = None


class StreamTaskMessageDone(_Model):
    type: Literal["done"] = "done"
    index: int | None = None
    parent_task_message: TaskMessage | None = None


StreamEvent = Annotated[
    StreamTaskMessageStart | StreamTaskMessageDelta | StreamTaskMessageFull | StreamTaskMessageDone,
    Field(discriminator="type"),
]
