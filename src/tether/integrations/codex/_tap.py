"""Codex's ``codex exec --json`` events (JSON lines) → the canonical stream.

What each event becomes:

- ``thread.started``: nothing; its thread id is kept (``codex exec resume <id>`` continues
  the thread). ``turn.started``: nothing.
- ``item.started`` / ``item.updated`` / ``item.completed``, by the item's ``type``:

  - ``agent_message``: text (markdown). Started, it opens a slot and each update streams
    what the text grew by; completed, the rest and a Done. An item that only completes
    (what ``codex exec`` writes today) is one Full.
  - ``reasoning``: the same, as reasoning; the text is Codex's reasoning summary, so it
    streams as ``reasoning_summary`` deltas. An item that only completes is a Start, its
    text as one delta and a Done, as agentex's tap sends it (a reasoning span is derived
    from a Start and its Done, never from a Full).
  - ``command_execution``, ``file_change``, ``mcp_tool_call``, ``web_search``,
    ``todo_list``, ``collab_tool_call``, and any other item with an id: a tool call. The
    request (a Full) when the item starts, or just before its response when it only
    completes; the response (a Full) when it completes, ``is_error`` when it failed, was
    declined, or a command exited non-zero. The call id is the item's id.
  - ``error``: a warning Codex goes on after (kept in :attr:`CodexTurn.warnings`); no event.

- ``turn.completed``: the usage. ``turn.failed`` and ``error``: the error as a Full(text)
  (once, when both say the same).

Each slot has an index of its own, counted from 0 and never reused.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from pydantic import JsonValue

from tether.integrations._cli import CliTurn, EventSource, json_events
from tether.stream import (
    ReasoningContent,
    ReasoningSummaryDelta,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolResponseContent,
    TurnUsage,
)

__all__ = ("CodexTurn", "codex_usage", "convert_codex_events")

logger = logging.getLogger("tether.integrations.codex")

_FAILED = frozenset({"failed", "declined", "error", "cancelled"})
_NOT_ARGUMENTS = frozenset(
    {"id", "type", "status", "result", "error", "aggregated_output", "exit_code", "agents_states"}
)


def _json(value: Any) -> JsonValue:
    """What the CLI printed, as JSON (it is JSON already: this only types it)."""
    return json.loads(json.dumps(value, default=str))  # type: ignore[no-any-return]


def _object(value: Any) -> dict[str, JsonValue]:
    typed = _json(value)
    return typed if isinstance(typed, dict) else {"value": typed}


def tool_name(item: dict[str, Any]) -> str:
    """The name a Codex item's tool call goes by: its type, an MCP tool as
    ``mcp__<server>__<tool>``, a collaboration tool by its own name."""
    kind = str(item.get("type") or "item")
    if kind == "mcp_tool_call":
        return f"mcp__{item.get('server', '')}__{item.get('tool', '')}"
    if kind == "collab_tool_call" and isinstance(item.get("tool"), str):
        return str(item["tool"])
    return kind


def tool_arguments(item: dict[str, Any]) -> dict[str, JsonValue]:
    """What a Codex item's tool call was asked to do."""
    kind = item.get("type")
    if kind == "mcp_tool_call":
        return _object(item.get("arguments") or {})
    if kind == "command_execution":
        return {"command": _json(item.get("command", ""))}
    if kind == "todo_list":
        return {"items": _json(item.get("items") or [])}
    skip = _NOT_ARGUMENTS | {"tool"} if kind == "collab_tool_call" else _NOT_ARGUMENTS
    return {k: _json(v) for k, v in item.items() if k not in skip}


def tool_result(item: dict[str, Any]) -> tuple[JsonValue, bool | None]:
    """A completed Codex item as a tool response: its content, and whether it failed
    (``None``: Codex said nothing either way)."""
    kind = item.get("type")
    status = item.get("status")
    failed: bool | None = status in _FAILED if isinstance(status, str) else None
    error = item.get("error")
    if kind == "command_execution":
        code = item.get("exit_code")
        if isinstance(code, int) and code != 0:
            failed = True
        content: JsonValue = {
            "output": _json(item.get("aggregated_output", "")),
            "exit_code": _json(code),
            "status": _json(status),
        }
        return content, failed
    if kind == "mcp_tool_call":
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"]), True
        result = item.get("result")
        blocks = result.get("content") if isinstance(result, dict) else None
        if (
            isinstance(blocks, list)
            and blocks
            and all(isinstance(b, dict) and b.get("type") == "text" for b in blocks)
        ):
            return "\n".join(str(b.get("text", "")) for b in blocks), failed
        return _json(result), failed
    if kind == "todo_list":
        return {"items": _json(item.get("items") or [])}, failed
    if isinstance(error, dict) and error.get("message"):
        failed = True
    return {k: _json(v) for k, v in item.items() if k not in ("id", "type")}, failed


class _Converter:
    """The tap's state over one stream (see the module docstring)."""

    def __init__(self) -> None:
        self.next_index = 0
        self.thread_id: str | None = None
        self.usage: dict[str, Any] | None = None
        self.completed = False
        self.failure: str | None = None
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.texts: dict[str, tuple[int, str]] = {}
        """An open text or reasoning item → (its slot, the text sent so far)."""
        self.requested: set[str] = set()
        self.answered: set[str] = set()
        self.tool_calls = 0
        self.reasoning_blocks = 0

    def _slot(self) -> int:
        index, self.next_index = self.next_index, self.next_index + 1
        return index

    def feed(self, event: dict[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        if kind in ("thread.started", "thread.resumed"):
            if isinstance(event.get("thread_id"), str):
                self.thread_id = event["thread_id"]
            return []
        if kind in ("item.started", "item.updated", "item.completed"):
            item = event.get("item")
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                return []
            return self._item(kind.removeprefix("item."), item)
        if kind == "turn.completed":
            self.completed = True
            if isinstance(event.get("usage"), dict):
                self.usage = event["usage"]
            return self.close_all()
        if kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self.failure = str(message or "the turn failed")
            if isinstance(event.get("usage"), dict):
                self.usage = event["usage"]
            out = self.close_all()
            if not self.errors or self.errors[-1] != self.failure:
                out.append(self._text_full(self.failure))
            return out
        if kind == "error":
            message = str(event.get("message") or "error")
            self.errors.append(message)
            return [*self.close_all(), self._text_full(message)]
        logger.debug("codex tap: skipped a %r event", kind)
        return []

    def _text_full(self, text: str) -> StreamEvent:
        content = TextContent(author="agent", content=text, format="markdown")
        return StreamTaskMessageFull(index=self._slot(), content=content)

    def _item(self, phase: str, item: dict[str, Any]) -> list[StreamEvent]:
        kind = item.get("type")
        item_id = str(item["id"])
        if kind in ("agent_message", "reasoning"):
            return self._text(phase, item_id, kind == "reasoning", str(item.get("text") or ""))
        if kind == "error":
            if phase == "completed":
                self.warnings.append(str(item.get("message") or ""))
            return []
        out: list[StreamEvent] = []
        if item_id not in self.requested:
            self.requested.add(item_id)
            self.tool_calls += 1
            request = ToolRequestContent(
                author="agent",
                name=tool_name(item),
                tool_call_id=item_id,
                arguments=tool_arguments(item),
            )
            out.append(StreamTaskMessageFull(index=self._slot(), content=request))
        if phase == "completed" and item_id not in self.answered:
            self.answered.add(item_id)
            content, failed = tool_result(item)
            response = ToolResponseContent(
                author="agent",
                name=tool_name(item),
                tool_call_id=item_id,
                content=content,
                is_error=failed,
            )
            out.append(StreamTaskMessageFull(index=self._slot(), content=response))
        return out

    def _text(self, phase: str, item_id: str, reasoning: bool, text: str) -> list[StreamEvent]:
        opened = self.texts.get(item_id)
        if opened is None and phase == "completed" and not reasoning:
            if not text:
                return []
            whole = TextContent(author="agent", content=text, format="markdown")
            return [StreamTaskMessageFull(index=self._slot(), content=whole)]
        out: list[StreamEvent] = []
        if opened is None:
            index = self._slot()
            if reasoning:
                self.reasoning_blocks += 1
                start: Any = ReasoningContent(
                    author="agent", summary=[], content=[], style="active"
                )
            else:
                start = TextContent(author="agent", content="", format="markdown")
            out.append(StreamTaskMessageStart(index=index, content=start))
            opened = (index, "")
        index, sent = opened
        if text.startswith(sent) and len(text) > len(sent):
            grown = text[len(sent) :]
            delta: Any = (
                ReasoningSummaryDelta(summary_index=0, summary_delta=grown)
                if reasoning
                else TextDelta(text_delta=grown)
            )
            out.append(StreamTaskMessageDelta(index=index, delta=delta))
            sent = text
        if phase == "completed":
            self.texts.pop(item_id, None)
            out.append(StreamTaskMessageDone(index=index))
        else:
            self.texts[item_id] = (index, sent)
        return out

    def close_all(self) -> list[StreamEvent]:
        done: list[StreamEvent] = [StreamTaskMessageDone(index=i) for i, _ in self.texts.values()]
        self.texts.clear()
        return done


def codex_usage(
    usage: dict[str, Any] | None,
    *,
    model: str | None = None,
    num_tool_calls: int = 0,
    num_reasoning_blocks: int = 0,
) -> TurnUsage:
    """The usage a ``turn.completed`` event reports. Codex counts the whole thread so far (a
    resumed thread's count includes the runs before it) and reports no cost: estimate one
    with ``tether.models.cost_of("openai:<model>", ...)`` if you need it.
    ``input_tokens`` includes the cached ones, as OpenAI counts them."""
    tokens = usage or {}
    prompt = _int(tokens.get("input_tokens"))
    output = _int(tokens.get("output_tokens"))
    return TurnUsage(
        model=model,
        input_tokens=prompt,
        output_tokens=output,
        cached_input_tokens=_int(tokens.get("cached_input_tokens")),
        reasoning_tokens=_int(tokens.get("reasoning_output_tokens")),
        total_tokens=None if prompt is None or output is None else prompt + output,
        num_tool_calls=num_tool_calls,
        num_reasoning_blocks=num_reasoning_blocks,
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def convert_codex_events(source: EventSource) -> AsyncGenerator[StreamEvent, None]:
    """The canonical stream of ``codex exec --json`` events: dicts, or their JSON lines (an
    open file of a captured run works as it is), sync or async. Use :class:`CodexTurn` for
    the usage as well.

    Example::

        with open("run.jsonl") as lines:
            async for event in convert_codex_events(lines):
                print(event.type, event.index)
    """
    async with aclosing(_convert(source, _Converter())) as events:
        async for event in events:
            yield event


async def _convert(source: EventSource, state: _Converter) -> AsyncGenerator[StreamEvent, None]:
    async with aclosing(json_events(source, what="codex tap")) as events:
        async for event in events:
            for converted in state.feed(event):
                yield converted
    for converted in state.close_all():  # a stream cut short leaves nothing open
        yield converted


class CodexTurn(CliTurn["_Converter"]):
    """One ``codex exec --json`` run as a :class:`~tether.stream.HarnessTurn`: its
    canonical events, then its usage.

    ``source`` is the run's events (dicts or JSON lines, sync or async: a captured file, a
    pipe), or a :func:`run_codex` process. ``model`` names the model (Codex's events do
    not): it is the name an auto-sent turn's messages are journaled under, so give the same
    one to a replay.

    Example::

        with open("run.jsonl") as lines:
            turn = CodexTurn(lines, model="gpt-5.5")
            async for event in UnifiedEmitter().yield_turn(turn):
                ...
        print(turn.usage().input_tokens, turn.thread_id, turn.failure)
    """

    def _new_state(self) -> _Converter:
        return _Converter()

    def _convert(self, lines: EventSource, state: _Converter) -> AsyncIterator[StreamEvent]:
        return _convert(lines, state)

    @property
    def thread_id(self) -> str | None:
        """Codex's thread id (``codex exec resume <id>`` continues it)."""
        return self._state.thread_id

    @property
    def warnings(self) -> list[str]:
        """The ``error`` items Codex went on after (a model it has no metadata for, say)."""
        return list(self._state.warnings)

    @property
    def failure(self) -> str | None:
        """Why the run failed, once the events are exhausted: ``turn.failed``'s error, the
        CLI's exit status, or a stream that ended before ``turn.completed``; ``None`` if it
        succeeded."""
        state = self._state
        if state.failure is not None:
            return state.failure
        process = self.process
        if process is not None and process.returncode not in (0, None):
            stderr = process.stderr.strip().splitlines()
            said = f": {stderr[-1]}" if stderr else ""
            return f"codex exited with status {process.returncode}{said}"
        if not state.completed:
            if state.errors:
                return state.errors[-1]
            return "the run ended before turn.completed (interrupted?)"
        return None

    def usage(self) -> TurnUsage:
        """Tokens from the last ``turn.completed`` (the thread's running total, as Codex
        counts); tool calls and reasoning blocks counted off the stream. Valid once the
        events are exhausted."""
        state = self._state
        return codex_usage(
            state.usage,
            model=self._model,
            num_tool_calls=state.tool_calls,
            num_reasoning_blocks=state.reasoning_blocks,
        )
