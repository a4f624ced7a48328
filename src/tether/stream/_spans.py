"""Span signals derived from the canonical stream: a pure, stateful reducer.

Tool calls and reasoning blocks become spans; text and data do not. The same events always
give the same signals, so spans can be re-derived from a stored log after the fact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from tether.stream._types import (
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    ToolRequestContent,
    ToolRequestDelta,
    ToolResponseContent,
)

__all__ = ("CloseSpan", "OpenSpan", "SpanDeriver", "SpanSignal")


@dataclass(frozen=True)
class OpenSpan:
    key: str
    kind: Literal["tool", "reasoning", "subagent"]
    name: str
    input: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True)
class CloseSpan:
    key: str
    output: JsonValue = None
    is_complete: bool = True
    is_error: bool | None = None


SpanSignal = OpenSpan | CloseSpan


@dataclass
class _PendingTool:
    tool_call_id: str
    name: str
    arguments: dict[str, JsonValue]
    args_buffer: str = ""


class SpanDeriver:
    """``observe(event)`` returns the span signals an event implies; ``flush()`` closes what
    is still open (as incomplete) when the stream stops early.

    Example::

        deriver = SpanDeriver()
        signals = [s for event in events for s in deriver.observe(event)] + deriver.flush()
    """

    def __init__(self) -> None:
        self._pending_tools: dict[int, _PendingTool] = {}  # streamed requests, until Done
        self._open_tools: list[str] = []  # tool_call_ids, in the order their spans opened
        self._reasoning: dict[int, str] = {}  # open reasoning slots and their text so far

    def observe(self, event: StreamEvent) -> list[SpanSignal]:
        if isinstance(event, StreamTaskMessageFull):
            return self._full(event)
        if event.index is None:
            return []
        if isinstance(event, StreamTaskMessageStart):
            return self._start(event.index, event)
        if isinstance(event, StreamTaskMessageDelta):
            self._delta(event.index, event)
            return []
        return self._done(event.index, event)

    def flush(self) -> list[SpanSignal]:
        signals: list[SpanSignal] = [
            CloseSpan(key, None, is_complete=False) for key in self._open_tools
        ]
        signals += [
            CloseSpan(f"reasoning:{index}", self._reasoning[index] or None, is_complete=False)
            for index in sorted(self._reasoning)
        ]
        self._pending_tools.clear()
        self._open_tools.clear()
        self._reasoning.clear()
        return signals

    def _start(self, index: int, event: StreamTaskMessageStart) -> list[SpanSignal]:
        content = event.content
        if isinstance(content, ToolRequestContent):
            self._pending_tools[index] = _PendingTool(
                content.tool_call_id, content.name, dict(content.arguments)
            )
            return []
        if isinstance(content, ReasoningContent):
            self._reasoning[index] = "".join([*content.summary, *(content.content or [])])
            return [OpenSpan(f"reasoning:{index}", "reasoning", "reasoning")]
        return []

    def _delta(self, index: int, event: StreamTaskMessageDelta) -> None:
        delta = event.delta
        if isinstance(delta, ToolRequestDelta) and index in self._pending_tools:
            self._pending_tools[index].args_buffer += delta.arguments_delta or ""
        elif isinstance(delta, ReasoningContentDelta) and index in self._reasoning:
            self._reasoning[index] += delta.content_delta or ""
        elif isinstance(delta, ReasoningSummaryDelta) and index in self._reasoning:
            self._reasoning[index] += delta.summary_delta or ""

    def _done(self, index: int, event: StreamTaskMessageDone) -> list[SpanSignal]:
        tool = self._pending_tools.pop(index, None)
        if tool is not None:
            self._open_tools.append(tool.tool_call_id)
            return [OpenSpan(tool.tool_call_id, "tool", tool.name, _arguments(tool))]
        if index in self._reasoning:
            text = self._reasoning.pop(index)
            return [CloseSpan(f"reasoning:{index}", text or None, is_complete=True)]
        return []

    def _full(self, event: StreamTaskMessageFull) -> list[SpanSignal]:
        content = event.content
        if isinstance(content, ToolRequestContent):
            if content.tool_call_id in self._open_tools:
                return []
            self._open_tools.append(content.tool_call_id)
            return [OpenSpan(content.tool_call_id, "tool", content.name, dict(content.arguments))]
        if isinstance(content, ToolResponseContent) and content.tool_call_id in self._open_tools:
            self._open_tools.remove(content.tool_call_id)
            return [
                CloseSpan(
                    content.tool_call_id,
                    content.content,
                    is_complete=True,
                    is_error=content.is_error,
                )
            ]
        return []


def _arguments(tool: _PendingTool) -> dict[str, JsonValue]:
    if not tool.args_buffer:
        return tool.arguments
    try:
        parsed = json.loads(tool.args_buffer)
    except ValueError:
        return {"_raw": tool.args_buffer}
    return parsed if isinstance(parsed, dict) else {"_raw": tool.args_buffer}
