"""The built-in agent loop: model → tools (in parallel) → model …, until a text-only answer.

Every model call and tool call goes through the turn, so the loop is durable at each step:
a crash resumes it from the journal, a replay re-runs it with zero model calls.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard, TypeVar
from xml.sax.saxutils import escape, quoteattr

from pydantic import JsonValue

from tether._canonical import canonical_json, sha256_hex
from tether._histories import HistoryMemo
from tether.agent._memory import MEMORY_TOOLS, AgentMemory, memory_tools
from tether.agent._toolbox import Toolbox
from tether.agent._tools import Tool
from tether.agent._toolset import TOOLSET_STEP, Toolset
from tether.agent._wait import WAIT_TOOL, wait_tool
from tether.engine import TASK_TOOL, AgentSpec, task_tool
from tether.errors import ContextOverflow, JournalError, RecordedModelFailure
from tether.journal import SIGNAL_MEDIA_TYPE, ToolPolicy, Turn
from tether.messages import (
    DataPart,
    Mediation,
    Message,
    ModelRequest,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResult,
)
from tether.models import Model, ModelRetryPolicy, estimate_tokens

__all__ = ("Agent", "AgentLoopError", "agent_spec", "render_signal")

T = TypeVar("T")
SUMMARY_PROMPT = (
    "Summarize the conversation so far for your own later use: the user's goals, the facts "
    "established, the decisions made, and anything still open. Be concise and complete."
)


class AgentLoopError(JournalError):
    """The model kept calling tools past the round limit."""

    code = "agent_loop_exhausted"


def _text_of(message: Message) -> str:
    return " ".join(
        getattr(part, "text", "") or getattr(part, "content", "") for part in message.parts
    )


def render_signal(data: JsonValue) -> str:
    """A signal as the model sees it: ``<signal type="..." sender-x="...">body</signal>``."""
    fields = data if isinstance(data, dict) else {}
    attributes = f" type={quoteattr(str(fields.get('type', '')))}"
    sender = fields.get("sender")
    if isinstance(sender, dict):
        attributes += "".join(
            f" sender-{key}={quoteattr(str(value))}" for key, value in sender.items()
        )
    if fields.get("tag"):
        attributes += f" tag={quoteattr(str(fields['tag']))}"
    return f"<signal{attributes}>{escape(str(fields.get('body', '')))}</signal>"


_RENDERED_KEPT = 1024
_rendered: OrderedDict[int, tuple[Message, Message]] = OrderedDict()
"""A signal's message -> the message the model reads for it, by identity (holding the
signal's, so its id is not reused while its entry lives)."""
_histories: HistoryMemo[tuple[Message, ...]] = HistoryMemo(entries=256, messages=16_384)
"""By the id of a history's first message: the rendering of the history last rendered."""


def _render(messages: Sequence[Message]) -> list[Message]:
    """Signals become text the model reads; everything else passes as it is.

    A history is rendered at every execution and grows by a few messages each time: the
    rendering resumes where that of the same objects ended (``HistoryMemo``). A signal
    renders to the same object each time (while remembered), so the input hash still resumes
    across it (``ModelRequest.input_hash`` resumes only from the very same messages)."""
    if not messages:
        return []
    start, rendered = 0, []
    known = _histories.resumable(id(messages[0]), messages)
    if known is not None:
        start, rendered = known[0], list(known[1])
    for message in messages[start:]:
        for part in message.parts:
            if type(part) is DataPart:
                message = _rendered_signal(message)
                break
        rendered.append(message)
    if start < len(messages):
        _histories.remember(id(messages[0]), messages, tuple(rendered))
    return rendered


def _is_signal(part: object) -> TypeGuard[DataPart]:
    return isinstance(part, DataPart) and part.media_type == SIGNAL_MEDIA_TYPE


def _rendered_signal(message: Message) -> Message:
    kept = _rendered.get(id(message))
    if kept is not None and kept[0] is message:
        return kept[1]
    if not any(map(_is_signal, message.parts)):
        return message
    parts = tuple(
        TextPart(text=render_signal(p.data)) if _is_signal(p) else p for p in message.parts
    )
    text = Message(role=message.role, parts=parts)
    _rendered[id(message)] = (message, text)
    if len(_rendered) > _RENDERED_KEPT:
        try:
            _rendered.popitem(last=False)  # the oldest: a signal long past renders anew
        except KeyError:  # another thread's loop emptied it meanwhile
            pass
    return text


class Agent:
    """The built-in harness. ``model`` names the model in requests (the client is the spec's).

    Example::

        Agent(model="openai:gpt-4o", system_prompt="You are terse.", tools=[weather])
    """

    name = "tether.agent"
    version = "1"

    def __init__(
        self,
        *,
        model: str = "default",
        system_prompt: str | None = None,
        tools: Sequence[Tool | Toolset] = (),
        max_rounds: int = 25,
        max_tokens: int | None = None,
        settings: dict[str, JsonValue] | None = None,
        context_window: int | None = None,
        reserve_tokens: int = 16_384,
        keep_tokens: int = 20_000,
        max_overflow_compactions: int = 2,
        timers: bool = False,
        tool_policies: Mapping[str, ToolPolicy] | None = None,
        memory: AgentMemory | None = None,
    ) -> None:
        self.timers = timers
        self.memory = memory
        """Offer the model the ``remember`` and ``recall`` tools on this long-term memory
        (docs/memory.md); ``None`` (the default): no memory tools."""
        self.tool_policies = dict(tool_policies or {})
        """How each tool's calls are bounded and retried, by tool name (``"*"``: any other);
        a tool's own policy (``@tool(policy=...)``) comes first."""
        """Offer the model the ``wait_until`` tool (docs/timers.md): an application's opt-in,
        as a model that may pause a conversation for days is a decision to make."""
        self.context_window = context_window
        self.reserve_tokens = reserve_tokens
        self.keep_tokens = keep_tokens
        self.max_overflow_compactions = max_overflow_compactions
        self.model = model
        self.system_prompt = system_prompt
        self.tools = {t.name: t for t in tools if isinstance(t, Tool)}
        self.toolsets = {t.name: t for t in tools if isinstance(t, Toolset)}
        """Tools found at run time (an MCP server's), by toolset name: each execution
        records their listing (a step) and offers them beside ``tools``."""
        if len(self.toolsets) != sum(isinstance(t, Toolset) for t in tools):
            raise ValueError("toolset names must be unique: give each MCP server a name=")
        if timers:
            if WAIT_TOOL in self.tools:
                raise ValueError(f"a tool named {WAIT_TOOL!r} would shadow the wait tool")
            self.tools[WAIT_TOOL] = wait_tool()
        self._memory_tools = Toolbox(memory_tools(memory) if memory is not None else [])
        for memory_tool in self._memory_tools.tools.values():
            if memory_tool.name in self.tools:
                raise ValueError(f"a tool named {memory_tool.name!r} would shadow a memory tool")
            self.tools[memory_tool.name] = memory_tool
        self.max_rounds = max_rounds
        self.settings = dict(settings or {})
        if max_tokens is not None:
            self.settings["maxTokens"] = max_tokens

    def pins(self) -> dict[str, JsonValue]:
        """What pins this agent's behaviour for its journal (docs/versions.md): its model's
        name and digests of its system prompt, each tool's schema and its settings. An
        agent version is named by them unless it is named by hand. Toolsets are pinned by
        what they name (an MCP server's command or URL), their tools being recorded per
        execution."""
        pins: dict[str, JsonValue] = {
            "model": self.model,
            "system": sha256_hex(self.system_prompt.encode()) if self.system_prompt else None,
            "tools": {
                name: sha256_hex(canonical_json(tool.spec.to_json_object()))
                for name, tool in sorted(self.tools.items())
            },
            "settings": sha256_hex(canonical_json(self.settings)),
        }
        if self.toolsets:  # only then: an agent without any keeps the pins it had
            pins["toolsets"] = {name: t.pins() for name, t in sorted(self.toolsets.items())}
        return pins

    def _request(
        self,
        messages: Sequence[Message],
        config: dict[str, JsonValue] | None,
        tools: _RunTools,
    ) -> ModelRequest:
        system = (Message.system(self.system_prompt),) if self.system_prompt else ()
        settings = dict(self.settings)
        if config and "resultSchema" in config:
            settings["resultSchema"] = config["resultSchema"]
        specs = tuple(t.spec for t in tools.offered.values())
        if _delegates(config):
            assert config is not None
            specs += (task_tool(config["subagents"]),)
        return ModelRequest(
            model=self.model, messages=(*system, *messages), tools=specs, settings=settings
        )

    async def _call(self, turn: Turn, part: ToolCallPart, tools: _RunTools) -> ToolResult | None:
        """Run one of the model's tool calls: a task call as a child submission (when the
        execution offers the task tool), a toolset's through the run's toolbox of them, any
        other through the journal's tool executor."""
        task = part.name == TASK_TOOL and _delegates(turn.config)
        tool = None if task else tools.offered.get(part.name)
        call = ToolCall(
            call_id=part.call_id,
            name=part.name,
            args=part.args,
            # From recorded values: a replay or a resume derives the same key.
            idempotency_key=f"{turn.execution_id}:{part.call_id}",
            mediation=Mediation.TASK
            if task
            else tool.spec.mediation
            if tool is not None
            else Mediation.HOST,
            idempotent=tool is not None and tool.idempotent,
        )
        if task:
            return await turn.delegate(call)
        if part.name == WAIT_TOOL and self.timers:  # run here, whatever the spec's executor
            return await turn.tool(call, executor=_WAITS)
        policy = self._policy(part.name, tool)
        if self.memory is not None and part.name in MEMORY_TOOLS:  # whatever the spec's executor
            return await turn.tool(call, executor=self._memory_tools, policy=policy)
        if part.name in tools.found.tools:
            return await turn.tool(call, executor=tools.found, policy=policy)
        return await turn.tool(call, policy=policy)

    def _policy(self, name: str, tool: Tool | None) -> ToolPolicy | None:
        if tool is not None and tool.policy is not None:
            return tool.policy
        return self.tool_policies.get(name) or self.tool_policies.get("*")

    async def _tools(self, turn: Turn) -> _RunTools:
        """The tools this execution offers: the agent's, and each toolset's as the execution
        recorded its listing (a step: listed live once, then served from the log)."""
        offered = dict(self.tools)
        found: list[Tool] = []
        for name, toolset in self.toolsets.items():

            async def listing(toolset: Toolset = toolset) -> JsonValue:
                return await toolset.list_tools(turn.execution_id)

            recorded = await turn.step(TOOLSET_STEP + name, listing)
            for tool in toolset.tools(recorded, turn.execution_id):
                if tool.name in offered or (tool.name == TASK_TOOL and _delegates(turn.config)):
                    raise AgentLoopError(
                        f"the tool {tool.name!r} of the toolset {name!r} would shadow another "
                        "tool of this agent: give the toolset a prefix"
                    )
                offered[tool.name] = tool
                found.append(tool)
        return _RunTools(offered, Toolbox(found))

    async def run(self, turn: Turn) -> JsonValue:
        if _delegates(turn.config) and TASK_TOOL in self.tools:
            raise AgentLoopError(
                f"a tool named {TASK_TOOL!r} would shadow the task tool this agent is given "
                "for its subagents: rename the tool"
            )
        try:
            return await self._run(turn, await self._tools(turn))
        finally:
            for toolset in self.toolsets.values():
                # Whatever ended the run (a park, a failure, a cancellation), what the toolset
                # started for it stops with it.
                await asyncio.shield(toolset.release(turn.execution_id))

    async def _run(self, turn: Turn, tools: _RunTools) -> JsonValue:
        messages = _render([*turn.history, *turn.inputs])
        overflows = 0
        used = 0  # the prompt tokens the last call reported
        for _ in range(self.max_rounds):
            if self.context_window is not None and used > self.context_window - self.reserve_tokens:
                messages = await self._compact(turn, messages, "threshold", tools)
            try:
                response = await turn.model(self._request(messages, turn.config, tools))
            except (ContextOverflow, RecordedModelFailure):
                # A replay meets the overflow again as a recorded failure at the same point.
                overflows += 1
                if overflows > self.max_overflow_compactions:
                    raise
                messages = await self._compact(turn, messages, "overflow", tools)
                continue
            used = (response.usage.input_tokens or 0) if response.usage else 0
            messages.append(response.message)
            calls = response.message.tool_calls
            if calls:
                answers = await _all(self._call(turn, part, tools) for part in calls)
                turn.wait_for_children()  # parks here while a task call's child runs
                results = [answer for answer in answers if answer is not None]
                messages += [
                    Message(role="tool", parts=(result.to_part(part.name),))
                    for part, result in zip(calls, results, strict=True)
                ]
                messages += _render(await turn.steering(("steer",)))
                continue
            follow_ups = _render(await turn.steering(("follow_up",)))
            if follow_ups:
                messages += follow_ups
                continue
            return response.message.text
        raise AgentLoopError(f"no final answer after {self.max_rounds} model calls")

    async def _compact(
        self,
        turn: Turn,
        messages: list[Message],
        reason: Literal["threshold", "overflow"],
        tools: _RunTools,
    ) -> list[Message]:
        """Summarize with the model, journal the compaction, and continue from the summary plus
        the most recent messages that fit in ``keep_tokens``."""
        request = self._request([*messages, Message.user(SUMMARY_PROMPT)], None, tools)
        summary = (await turn.model(request, purpose="summary")).message.text
        keep, budget = 0, self.keep_tokens
        for message in reversed(messages):
            budget -= estimate_tokens(_text_of(message))
            if budget < 0 or keep == len(messages) - 1:
                break
            keep += 1
        keep = _whole_batches(messages, keep)
        await turn.compact(summary, keep=keep, reason=reason)
        kept = messages[len(messages) - keep :] if keep else []
        return [Message.user(f"Summary of the conversation so far:\n{summary}"), *kept]


_WAITS = Toolbox([wait_tool()])


@dataclass(frozen=True, slots=True)
class _RunTools:
    """The tools one execution offers, by name, and the toolbox of those its toolsets found."""

    offered: dict[str, Tool]
    found: Toolbox


def _whole_batches(messages: Sequence[Message], keep: int) -> int:
    """``keep``, moved so that the kept messages do not start inside a tool batch: a result
    needs the assistant message that asked for it before it (every provider refuses one
    that answers no call). The window grows back to that message, unless it would then keep
    everything; it then shrinks past the results instead (the summary covers them)."""
    start = back = len(messages) - keep
    while 0 < back < len(messages) and messages[back].role == "tool":
        back -= 1
    if back > 0:
        return len(messages) - back
    while start < len(messages) and messages[start].role == "tool":
        start += 1
    return len(messages) - start


def _delegates(config: dict[str, JsonValue] | None) -> bool:
    """The execution offers the task tool: its recorded config names subagents."""
    return bool(config and config.get("subagents"))


async def _all(calls: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Run a tool batch in parallel; the first failure (a park, say) is what surfaces."""
    calls = list(calls)
    if len(calls) == 1:  # the usual batch: no task, and no loop iterations to hand it over
        return [await calls[0]]
    try:
        async with asyncio.TaskGroup() as group:
            running = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from None
    return [task.result() for task in running]


def agent_spec(
    model: Model,
    *,
    model_name: str = "default",
    system_prompt: str | None = None,
    tools: Sequence[Tool | Toolset] = (),
    max_rounds: int = 25,
    max_tokens: int | None = None,
    context_window: int | None = None,
    reserve_tokens: int = 16_384,
    keep_tokens: int = 20_000,
    model_timeout: float | None = None,
    model_retry: ModelRetryPolicy | None = None,
    timers: bool = False,
    tool_policies: Mapping[str, ToolPolicy] | None = None,
    memory: AgentMemory | None = None,
) -> AgentSpec:
    """An engine spec running the built-in agent, with ``model`` as the client and a summarizer
    (for queued compaction) that asks the same model. ``model_timeout`` and ``model_retry``
    override the runtime's for its model calls (see :class:`~tether.engine.AgentSpec`).
    ``timers`` offers the model the ``wait_until`` tool (docs/timers.md). ``tools`` may hold
    toolsets (an MCP server's tools, ``tether.tools.mcp``) beside tools. ``tool_policies``
    bounds and retries the calls of tools by name (``"*"``: any other), for tools that have
    no policy of their own (:class:`~tether.journal.ToolPolicy`). ``memory`` offers the
    ``remember`` and ``recall`` tools on a long-term memory (docs/memory.md).

    Example::

        AgentDefinition(lambda instance, env: agent_spec(EchoModel(), tools=[clock]))
    """

    async def summarize(messages: list[Message]) -> str:
        request = ModelRequest(model=model_name, messages=(*messages, Message.user(SUMMARY_PROMPT)))
        return (await model.request(request)).message.text

    harness = Agent(
        model=model_name,
        system_prompt=system_prompt,
        tools=tools,
        max_rounds=max_rounds,
        max_tokens=max_tokens,
        context_window=context_window,
        reserve_tokens=reserve_tokens,
        keep_tokens=keep_tokens,
        timers=timers,
        tool_policies=tool_policies,
        memory=memory,
    )
    return AgentSpec(
        harness=harness,
        model=model,
        tools=Toolbox([t for t in tools if isinstance(t, Tool)]),
        summarize=summarize,
        model_timeout=model_timeout,
        model_retry=model_retry,
    )
