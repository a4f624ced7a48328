"""Claude Code's ``claude -p --output-format stream-json --verbose`` events → the canonical stream.

What each event becomes (every other event, and every other ``system`` subtype, is skipped):

- ``system`` ``init``: nothing; its session id, model, cwd and tools are kept on the turn.
- ``assistant``: each content block whole: ``text`` → Full(text, markdown), ``thinking`` →
  Start(reasoning) + Delta(reasoning content) + Done, as agentex's tap sends it (so a
  reasoning span comes out), ``tool_use`` and ``server_tool_use`` → Full(tool request), a
  server tool's ``*_tool_result`` → Full(tool response). ``redacted_thinking`` is counted as
  a reasoning block and shows nothing. Claude Code writes one event per block, all with the
  message's id: the API message id counts the model calls.
- ``user``: each ``tool_result`` block → Full(tool response) with the tool's name, its
  content as text (text blocks joined, an image as ``[image]``), cut to its first 4000
  characters as agentex's tap does (:data:`MAX_RESULT_LENGTH`), and ``is_error``; the user's
  own text (the prompt, ``[Request interrupted by user]``) is not the agent's output.
- ``stream_event`` (``--include-partial-messages``): the incremental form. A
  ``content_block_start`` opens a slot (text, reasoning or tool request), its deltas stream
  into it (``text_delta``, ``thinking_delta``, ``input_json_delta``), ``content_block_stop``
  closes it. The whole ``assistant`` events of a message that streamed are then not sent
  again (Claude Code writes each block whole as well, before the block's stop).
- ``result``: the usage (tokens, cost, duration); nothing is shown, unless the run failed
  with an error the stream has not shown as text (``error_max_turns``, an interrupted run),
  which comes as a Full(text).

Each slot has an index of its own, counted from 0 and never reused.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from pydantic import JsonValue

from tether.integrations._cli import CliTurn, EventSource, json_events
from tether.stream import (
    ReasoningContent,
    ReasoningContentDelta,
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
    TurnUsage,
)

__all__ = ("MAX_RESULT_LENGTH", "ClaudeCodeTurn", "claude_code_usage", "convert_claude_code_events")

logger = logging.getLogger("tether.integrations.claude_code")

SYNTHETIC_MODEL = "<synthetic>"
"""The model Claude Code names on a message it wrote itself (an API error, say)."""


def _json(value: Any) -> JsonValue:
    """What the CLI printed, as JSON (it is JSON already: this only types it)."""
    return json.loads(json.dumps(value, default=str))  # type: ignore[no-any-return]


def _arguments(value: Any) -> dict[str, JsonValue]:
    if isinstance(value, dict):
        arguments = _json(value)
        assert isinstance(arguments, dict)
        return arguments
    return {} if value is None else {"value": _json(value)}


def _result_text(content: Any) -> str:
    """A ``tool_result`` block's content as the text the model read."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                pieces.append(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") == "image":
                pieces.append("[image]")
            else:
                pieces.append(json.dumps(block, sort_keys=True, default=str))
        return "\n".join(pieces)
    return json.dumps(content, sort_keys=True, default=str)


MAX_RESULT_LENGTH = 4000
"""The characters of a tool's result the tap passes on, as agentex's claude-code tap does
(``_MAX_RESULT_LENGTH``): a command's whole output stays in Claude Code's own transcript."""


class _Converter:
    """The tap's state over one stream (see the module docstring)."""

    def __init__(self) -> None:
        self.next_index = 0
        self.init: dict[str, Any] | None = None
        self.results: list[dict[str, Any]] = []
        self.tool_names: dict[str, str] = {}
        """tool_use id → tool name, for the responses."""
        self.messages: set[str] = set()
        """API message ids of the model's messages (the model calls)."""
        self.streamed: set[str] = set()
        """Messages whose blocks came as stream events."""
        self.current: dict[str | None, str] = {}
        """The message streaming now, per parent tool call (a subagent's run beside ours)."""
        self.slots: dict[tuple[str, int], int] = {}
        """(message id, block index) → the open slot of a streamed block."""
        self.slot_tools: dict[int, tuple[str, str]] = {}
        self.tool_calls = 0
        self.reasoning_blocks = 0
        self.last_text: str | None = None

    def _slot(self) -> int:
        index, self.next_index = self.next_index, self.next_index + 1
        return index

    def _full(self, content: Any) -> StreamEvent:
        if isinstance(content, TextContent):
            self.last_text = content.content
        return StreamTaskMessageFull(index=self._slot(), content=content)

    def feed(self, event: dict[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        if kind == "system":
            if event.get("subtype") == "init":
                self.init = event
            return []
        if kind == "assistant":
            return self._assistant(event)
        if kind == "user":
            return self._user(event)
        if kind == "stream_event":
            return self._stream(event)
        if kind == "result":
            return self._result(event)
        logger.debug("claude-code tap: skipped a %r event", kind)
        return []

    # --- whole messages ----------------------------------------------------------------

    def _assistant(self, event: dict[str, Any]) -> list[StreamEvent]:
        message = event.get("message")
        if not isinstance(message, dict):
            return []
        message_id = message.get("id")
        if isinstance(message_id, str) and message.get("model") != SYNTHETIC_MODEL:
            self.messages.add(message_id)
        if message_id in self.streamed:
            return []  # its blocks came as stream events
        out: list[StreamEvent] = []
        for block in message.get("content") or ():
            out += self._block(block)
        return out

    def _block(self, block: Any) -> list[StreamEvent]:
        if not isinstance(block, dict):
            return []
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text") or "")
            if not text:
                return []
            return [self._full(TextContent(author="agent", content=text, format="markdown"))]
        if kind == "thinking":
            self.reasoning_blocks += 1
            return self._reasoning(str(block.get("thinking") or ""))
        if kind == "redacted_thinking":
            self.reasoning_blocks += 1
            return []
        if kind in ("tool_use", "server_tool_use"):
            call_id, name = str(block.get("id", "")), str(block.get("name", ""))
            self.tool_names[call_id] = name
            self.tool_calls += 1
            request = ToolRequestContent(
                author="agent",
                name=name,
                tool_call_id=call_id,
                arguments=_arguments(block.get("input")),
            )
            return [self._full(request)]
        if isinstance(kind, str) and kind.endswith("_tool_result") and "tool_use_id" in block:
            return [self._response(block, _json(block.get("content")))]
        logger.debug("claude-code tap: skipped a %r block", kind)
        return []

    def _reasoning(self, thinking: str) -> list[StreamEvent]:
        """A whole thinking block as agentex's tap sends one: Start, its text as a delta,
        Done (a reasoning span is derived from a Start and its Done, never from a Full)."""
        index = self._slot()
        start = ReasoningContent(author="agent", summary=[], content=[], style="active")
        out: list[StreamEvent] = [StreamTaskMessageStart(index=index, content=start)]
        if thinking:
            delta = ReasoningContentDelta(content_index=0, content_delta=thinking)
            out.append(StreamTaskMessageDelta(index=index, delta=delta))
        out.append(StreamTaskMessageDone(index=index))
        return out

    def _response(self, block: dict[str, Any], content: JsonValue) -> StreamEvent:
        call_id = str(block.get("tool_use_id", ""))
        error = block.get("is_error")
        if isinstance(content, dict) and str(content.get("type", "")).endswith("_error"):
            error = True  # a server tool's error result
        response = ToolResponseContent(
            author="agent",
            name=self.tool_names.get(call_id, ""),
            tool_call_id=call_id,
            content=content,
            is_error=error if isinstance(error, bool) else None,
        )
        return self._full(response)

    def _user(self, event: dict[str, Any]) -> list[StreamEvent]:
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return []  # the user's own text
        return [
            self._response(block, _result_text(block.get("content"))[:MAX_RESULT_LENGTH])
            for block in content
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]

    # --- streamed messages (--include-partial-messages) --------------------------------

    def _stream(self, event: dict[str, Any]) -> list[StreamEvent]:
        raw = event.get("event")
        if not isinstance(raw, dict):
            return []
        parent = event.get("parent_tool_use_id")
        kind = raw.get("type")
        if kind == "message_start":
            message = raw.get("message")
            message_id = message.get("id") if isinstance(message, dict) else None
            if isinstance(message_id, str):
                self.current[parent] = message_id
                self.streamed.add(message_id)
                self.messages.add(message_id)
            return []
        message_id = event.get("api_message_id") or self.current.get(parent)
        if not isinstance(message_id, str):
            return []
        self.streamed.add(message_id)
        at = raw.get("index")
        key = (message_id, at if isinstance(at, int) else -1)
        if kind == "content_block_start":
            return self._block_start(key, raw.get("content_block"))
        if kind == "content_block_delta":
            return self._block_delta(key, raw.get("delta"))
        if kind == "content_block_stop":
            return self._close(key)
        if kind == "message_stop":
            return self._close_message(message_id)
        return []

    def _block_start(self, key: tuple[str, int], block: Any) -> list[StreamEvent]:
        if not isinstance(block, dict):
            return []
        kind = block.get("type")
        out: list[StreamEvent] = []
        if kind == "text":
            index = self.slots[key] = self._slot()
            start = TextContent(author="agent", content="", format="markdown")
            out.append(StreamTaskMessageStart(index=index, content=start))
            self.last_text = ""
            if block.get("text"):
                out += self._block_delta(key, {"type": "text_delta", "text": block["text"]})
        elif kind == "thinking":
            self.reasoning_blocks += 1
            index = self.slots[key] = self._slot()
            reasoning = ReasoningContent(author="agent", summary=[], content=[], style="active")
            out.append(StreamTaskMessageStart(index=index, content=reasoning))
            if block.get("thinking"):
                delta = {"type": "thinking_delta", "thinking": block["thinking"]}
                out += self._block_delta(key, delta)
        elif kind == "redacted_thinking":
            self.reasoning_blocks += 1
        elif kind in ("tool_use", "server_tool_use"):
            call_id, name = str(block.get("id", "")), str(block.get("name", ""))
            self.tool_names[call_id] = name
            self.tool_calls += 1
            index = self.slots[key] = self._slot()
            self.slot_tools[index] = (call_id, name)
            request = ToolRequestContent(
                author="agent", name=name, tool_call_id=call_id, arguments={}
            )
            out.append(StreamTaskMessageStart(index=index, content=request))
            if isinstance(block.get("input"), dict) and block["input"]:
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                out += self._block_delta(key, delta)
        else:
            out += self._block(block)  # a server tool's result arrives whole
        return out

    def _block_delta(self, key: tuple[str, int], delta: Any) -> list[StreamEvent]:
        index = self.slots.get(key)
        if index is None or not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text") or "")
            self.last_text = (self.last_text or "") + text
            chunk = StreamTaskMessageDelta(index=index, delta=TextDelta(text_delta=text))
            return [chunk]
        if kind == "thinking_delta":
            thinking = ReasoningContentDelta(
                content_index=0, content_delta=str(delta.get("thinking") or "")
            )
            return [StreamTaskMessageDelta(index=index, delta=thinking)]
        if kind == "input_json_delta" and index in self.slot_tools:
            call_id, name = self.slot_tools[index]
            arguments = ToolRequestDelta(
                tool_call_id=call_id, name=name, arguments_delta=str(delta.get("partial_json"))
            )
            return [StreamTaskMessageDelta(index=index, delta=arguments)]
        return []  # signature_delta, citations_delta: nothing to show

    def _close(self, key: tuple[str, int]) -> list[StreamEvent]:
        index = self.slots.pop(key, None)
        if index is None:
            return []
        self.slot_tools.pop(index, None)
        return [StreamTaskMessageDone(index=index)]

    def _close_message(self, message_id: str) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for key in [key for key in self.slots if key[0] == message_id]:
            out += self._close(key)
        return out

    def close_all(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for key in list(self.slots):
            out += self._close(key)
        return out

    # --- the end -----------------------------------------------------------------------

    def _result(self, event: dict[str, Any]) -> list[StreamEvent]:
        self.results.append(event)
        out = self.close_all()
        error = result_error(event)
        if error is not None and error != self.last_text:
            out.append(self._full(TextContent(author="agent", content=error, format="markdown")))
        return out


def result_error(result: dict[str, Any]) -> str | None:
    """What a failed run's ``result`` event says went wrong; ``None`` if it succeeded."""
    if not result.get("is_error") and result.get("subtype", "success") == "success":
        return None
    text = result.get("result")
    if isinstance(text, str) and text:
        return text
    errors = [str(e) for e in result.get("errors") or () if e]
    subtype = str(result.get("subtype") or "error")
    return f"{subtype}: {'; '.join(errors)}" if errors else subtype


def claude_code_usage(
    results: Sequence[dict[str, Any]],
    *,
    model: str | None = None,
    num_llm_calls: int | None = None,
    num_tool_calls: int = 0,
    num_reasoning_blocks: int = 0,
) -> TurnUsage:
    """A run's usage from its ``result`` events (none: the run never finished, only the
    counts are known). A run usually ends with one; one that woke up again (a background
    subagent's notification) has a result per wake, and their counts add up.

    ``input_tokens`` counts every prompt token, the cached ones included, as Tether's other
    integrations do (Anthropic reports fresh, cache-write and cache-read tokens apart);
    ``cached_input_tokens`` is the cache reads. ``cost_usd`` is this run's: the sum of each
    result's ``model_usage_since_last_result`` when the CLI writes it, else the last
    ``total_cost_usd``, which on a resumed session is the whole session's.
    """
    usage = TurnUsage(
        model=model,
        num_llm_calls=num_llm_calls,
        num_tool_calls=num_tool_calls,
        num_reasoning_blocks=num_reasoning_blocks,
    )
    if not results:
        return usage
    counts: dict[str, int | None] = dict.fromkeys(
        ("prompt", "output", "read", "thinking", "duration")
    )
    for result in results:
        tokens = result.get("usage")
        tokens = tokens if isinstance(tokens, dict) else {}
        details = tokens.get("output_tokens_details")
        fresh = _int(tokens.get("input_tokens"))
        written = _int(tokens.get("cache_creation_input_tokens")) or 0
        read = _int(tokens.get("cache_read_input_tokens"))
        for name, value in (
            ("prompt", None if fresh is None else fresh + written + (read or 0)),
            ("output", _int(tokens.get("output_tokens"))),
            ("read", read),
            (
                "thinking",
                _int(details.get("thinking_tokens")) if isinstance(details, dict) else None,
            ),
            ("duration", _int(result.get("duration_ms"))),
        ):
            if value is not None:
                counts[name] = (counts[name] or 0) + value
    last = results[-1]
    names = [name for name in last.get("modelUsage") or {} if isinstance(name, str)]
    prompt, output = counts["prompt"], counts["output"]
    return usage.model_copy(
        update={
            "model": model or (names[0] if len(names) == 1 else None),
            "input_tokens": prompt,
            "output_tokens": output,
            "cached_input_tokens": counts["read"],
            "reasoning_tokens": counts["thinking"],
            "total_tokens": None if prompt is None or output is None else prompt + output,
            "cost_usd": _cost(results),
            "duration_ms": counts["duration"],
        }
    )


def _cost(results: Sequence[dict[str, Any]]) -> float | None:
    segments = [result.get("model_usage_since_last_result") for result in results]
    if all(isinstance(segment, dict) for segment in segments):
        costs = [
            entry.get("costUSD")
            for segment in segments
            if isinstance(segment, dict)
            for entry in segment.values()
            if isinstance(entry, dict)
        ]
        known = [float(cost) for cost in costs if isinstance(cost, int | float)]
        if known:
            return sum(known)
    last = results[-1]
    reported = last.get("total_cost_usd", last.get("cost_usd"))
    return float(reported) if isinstance(reported, int | float) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def convert_claude_code_events(source: EventSource) -> AsyncGenerator[StreamEvent, None]:
    """The canonical stream of Claude Code's stream-json events: dicts, or their JSON lines
    (an open file of a captured run works as it is), sync or async. Use
    :class:`ClaudeCodeTurn` for the usage as well.

    Example::

        with open("run.jsonl") as lines:
            async for event in convert_claude_code_events(lines):
                print(event.type, event.index)
    """
    async with aclosing(_convert(source, _Converter())) as events:
        async for event in events:
            yield event


async def _convert(source: EventSource, state: _Converter) -> AsyncGenerator[StreamEvent, None]:
    async with aclosing(json_events(source, what="claude-code tap")) as events:
        async for event in events:
            for converted in state.feed(event):
                yield converted
    for converted in state.close_all():  # a stream cut short leaves nothing open
        yield converted


class ClaudeCodeTurn(CliTurn["_Converter"]):
    """One Claude Code run (``claude -p --output-format stream-json --verbose``) as a
    :class:`~tether.stream.HarnessTurn`: its canonical events, then its usage.

    ``source`` is the run's events (dicts or JSON lines, sync or async: a captured file, a
    pipe), or a :class:`run_claude_code` process. ``model`` names the model before the run
    says which (the name an auto-sent turn's messages are journaled under, so give the same
    one to a replay); the ``init`` event's model replaces it in the usage.

    Example::

        with open("run.jsonl") as lines:
            turn = ClaudeCodeTurn(lines)
            async for event in UnifiedEmitter().yield_turn(turn):
                ...
        print(turn.usage().cost_usd, turn.session_id, turn.failure)
    """

    def _new_state(self) -> _Converter:
        return _Converter()

    def _convert(self, lines: EventSource, state: _Converter) -> AsyncIterator[StreamEvent]:
        return _convert(lines, state)

    @property
    def init(self) -> dict[str, Any] | None:
        """The ``system`` ``init`` event: session id, model, cwd, tools, permission mode."""
        return self._state.init

    @property
    def result(self) -> dict[str, Any] | None:
        """The last ``result`` event, once the run has ended with one."""
        return self._state.results[-1] if self._state.results else None

    @property
    def session_id(self) -> str | None:
        """Claude Code's session id (``claude -p --resume <id>`` continues it)."""
        for event in (self.result, self._state.init):
            if event is not None and isinstance(event.get("session_id"), str):
                return str(event["session_id"])
        return None

    @property
    def failure(self) -> str | None:
        """Why the run failed, once the events are exhausted: the ``result`` event's error,
        the CLI's exit status, or a stream that ended without a ``result``; ``None`` if it
        succeeded."""
        result = self.result
        process = self.process
        if result is not None:
            error = result_error(result)
            if error is not None:
                return error
        if process is not None and process.returncode not in (0, None):
            stderr = process.stderr.strip().splitlines()
            said = f": {stderr[-1]}" if stderr else ""
            return f"claude exited with status {process.returncode}{said}"
        if result is None:
            return "the run ended without a result event (interrupted?)"
        return None

    def usage(self) -> TurnUsage:
        """Tokens, cost and duration from the ``result`` event; the model calls, tool calls
        and reasoning blocks counted off the stream. Valid once the events are exhausted."""
        state = self._state
        model = state.init.get("model") if state.init is not None else None
        return claude_code_usage(
            state.results,
            model=model if isinstance(model, str) else self._model,
            num_llm_calls=len(state.messages) if state.messages else None,
            num_tool_calls=state.tool_calls,
            num_reasoning_blocks=state.reasoning_blocks,
        )
