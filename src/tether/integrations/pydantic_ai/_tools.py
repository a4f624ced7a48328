"""A durable run's toolset: every call through the journal, pydantic-ai's deferrals as gates.

pydantic-ai defers a tool call in three ways; each becomes a Tether gate instead of ending
the run with ``DeferredToolRequests``:

- a tool declared ``requires_approval=True`` is an approval call (``Mediation.APPROVAL``)
  from the start: the run parks until someone decides, then the tool runs with
  ``ctx.tool_call_approved`` set, or the model reads the denial;
- an external tool (``ExternalToolset``: its result comes from outside) is an input call
  (``Mediation.INPUT``): the run parks until ``Runtime.answer`` gives its result;
- a tool that raises ``ApprovalRequired`` or ``CallDeferred`` itself has already started
  (its call is journaled), so what it asked for is recorded as that call's outcome and a
  second call, ``<call id>:approval`` or ``<call id>:input``, is the gate. Its result is
  what the agent and, in later turns, the model see for the original call;
- a call deferred before its tool runs (by an args validator or a capability hook) reaches
  pydantic-ai's ``handle_deferred_tool_calls``, where the same gate calls answer it inline:
  an approved call then runs (journaled under its own id), an answered one takes the answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue
from pydantic_ai import (
    ApprovalRequired,
    CallDeferred,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    RunContext,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai import ToolFailed as PAToolFailed
from pydantic_ai import messages as pa
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from tether.integrations._bridge import journaled_tool, policy_for, tool_call
from tether.integrations.pydantic_ai._convert import as_text, jsonable
from tether.integrations.pydantic_ai._mcp import IDEMPOTENT
from tether.integrations.pydantic_ai._model import inside_tool
from tether.journal import ToolPolicy, ToolScope
from tether.messages import (
    Mediation,
    Message,
    Part,
    ToolCall,
    ToolCallPart,
    ToolOutcomeStatus,
    ToolResult,
    ToolResultPart,
)

__all__ = ("DEFERRED", "JournaledToolset", "ToolFailed", "gated_history", "resolve_deferred")

_RETRY = "pydantic_ai.retry"
_FAILED = "pydantic_ai.tool_failed"
DEFERRED = "pydantic_ai.deferred"
"""The key of a call's outcome data when the tool asked for a gate (``approval`` or ``input``)."""
_GATES = {"approval": Mediation.APPROVAL, "input": Mediation.INPUT}


class ToolFailed(RuntimeError):
    """A tool raised (journaled as an error outcome); raised again on resume and replay."""


def _marker(result: ToolResult) -> str | None:
    data = result.data
    if isinstance(data, dict) and result.status is ToolOutcomeStatus.OK:
        gate = data.get(DEFERRED)
        return gate if isinstance(gate, str) and gate in _GATES else None
    return None


@dataclasses.dataclass
class JournaledToolset(WrapperToolset[Any]):
    """Every call through the journal; approval and external tools become Tether gates."""

    idempotent: frozenset[str] = frozenset()
    policies: Mapping[str, ToolPolicy] = dataclasses.field(default_factory=dict)
    """Each tool's :class:`~tether.journal.ToolPolicy`, by name (``"*"``: any other)."""
    approval: set[str] = dataclasses.field(default_factory=set)
    external: set[str] = dataclasses.field(default_factory=set)
    safe_again: set[str] = dataclasses.field(default_factory=set)
    """The MCP tools their server's annotations (or the run's MCP policy) say are idempotent."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        for name, tool in tools.items():
            if (tool.tool_def.metadata or {}).get(IDEMPOTENT) is True:
                self.safe_again.add(name)
            kind = tool.tool_def.kind
            if kind in ("unapproved", "external"):
                # Tether gates the call itself, so pydantic-ai must not defer it.
                (self.approval if kind == "unapproved" else self.external).add(name)
                function_def = dataclasses.replace(tool.tool_def, kind="function")
                tools[name] = dataclasses.replace(tool, tool_def=function_def)
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        call_id = ctx.tool_call_id or f"{name}:{ctx.run_step}"
        mediation = (
            Mediation.APPROVAL
            if name in self.approval
            else Mediation.INPUT
            if name in self.external
            else Mediation.HOST
        )
        args: dict[str, JsonValue] = jsonable(tool_args)  # type: ignore[assignment]
        result = await self._journaled(name, call_id, args, mediation, ctx, tool)
        gate = _marker(result)
        if gate is not None:
            # The tool asked for a person: the gate is a call of its own, after this one,
            # whose request carries what the tool attached to its ask.
            asked = result.data.get("metadata") if isinstance(result.data, dict) else None
            metadata = asked if isinstance(asked, dict) else None
            result = await self._journaled(
                name, f"{call_id}:{gate}", args, _GATES[gate], ctx, tool, metadata
            )
            if _marker(result) is not None:
                raise ToolFailed(f"{name}: asked for {_marker(result)} again once {gate} was given")
        if result.status is ToolOutcomeStatus.ERROR:
            if result.data == _RETRY:
                raise ModelRetry(result.content)
            if result.data == _FAILED:
                raise PAToolFailed(result.content)
            raise ToolFailed(f"{name}: {result.content}")
        # Denied and unknown outcomes are for the model to read; successes go back as
        # the journaled value, so the agent sees the same thing live and on replay.
        return result.content if result.data is None or result.is_error else result.data

    async def _journaled(
        self,
        name: str,
        call_id: str,
        args: dict[str, JsonValue],
        mediation: Mediation,
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
        metadata: dict[str, JsonValue] | None = None,
    ) -> ToolResult:
        call = tool_call(
            call_id,
            name,
            args,
            mediation=mediation,
            idempotent=name in self.idempotent or name in self.safe_again,
            metadata=metadata,
        )
        # Only a decided approval reaches the executor: pydantic-ai's tool sees it approved.
        run_ctx = (
            dataclasses.replace(ctx, tool_call_approved=True)
            if call.mediation is (Mediation.APPROVAL)
            else ctx
        )

        async def native(call: ToolCall, scope: ToolScope) -> ToolResult:
            try:
                with inside_tool():
                    value = await self.wrapped.call_tool(name, dict(call.args), run_ctx, tool)
            except ModelRetry as retry:
                return _error(call, retry.message, _RETRY)
            except PAToolFailed as failed:
                return _error(call, failed.message, _FAILED)
            except ApprovalRequired as asked:
                return _asked(call, "approval", asked.metadata)
            except CallDeferred as deferred:
                return _asked(call, "input", deferred.metadata)
            data = None if isinstance(value, str) else jsonable(value)
            return ToolResult(call_id=call.call_id, content=as_text(value), data=data)

        return await journaled_tool(call, native, policy=policy_for(name, self.policies))


async def resolve_deferred(requests: DeferredToolRequests) -> DeferredToolResults:
    """Tether's answers to the calls pydantic-ai deferred before running them: each waits
    at a gate call of its own (``<call id>:approval`` or ``:input``); the run parks until
    every gate is decided or answered."""
    results = DeferredToolResults()
    for part in requests.approvals:
        result = await _gate(part, "approval", requests.metadata.get(part.tool_call_id))
        if result.status is ToolOutcomeStatus.DENIED:
            results.approvals[part.tool_call_id] = ToolDenied(result.content)
        else:
            edited = result.data if isinstance(result.data, dict) else None
            same = edited is None or edited == part.args_as_dict()
            results.approvals[part.tool_call_id] = ToolApproved(
                override_args=None if same else edited
            )
    for part in requests.calls:
        result = await _gate(part, "input", requests.metadata.get(part.tool_call_id))
        results.calls[part.tool_call_id] = (
            result.content if result.status is not ToolOutcomeStatus.OK else result.data
        )
    return results


async def _gate(part: pa.ToolCallPart, gate: str, metadata: dict[str, Any] | None) -> ToolResult:
    args: dict[str, JsonValue] = jsonable(part.args_as_dict())  # type: ignore[assignment]
    attached = jsonable(metadata) if metadata is not None else None
    # The gate does nothing once passed (pydantic-ai runs the approved call), so running
    # it again after a crash is safe.
    call = tool_call(
        f"{part.tool_call_id}:{gate}",
        part.tool_name,
        args,
        mediation=_GATES[gate],
        idempotent=True,
        metadata=attached if isinstance(attached, dict) else None,
    )

    async def passed(call: ToolCall, scope: ToolScope) -> ToolResult:
        return ToolResult(call_id=call.call_id, content="approved", data=dict(call.args))

    return await journaled_tool(call, passed)


def _error(call: ToolCall, content: str, marker: str) -> ToolResult:
    return ToolResult(
        call_id=call.call_id,
        content=content,
        data=marker,
        is_error=True,
        status=ToolOutcomeStatus.ERROR,
    )


def _asked(call: ToolCall, gate: str, metadata: dict[str, Any] | None) -> ToolResult:
    what = "an approval" if gate == "approval" else "a result from outside"
    return ToolResult(
        call_id=call.call_id,
        content=f"{call.name} waits for {what}.",
        data={DEFERRED: gate, "metadata": jsonable(metadata)},
    )


def gated_history(messages: Sequence[Message]) -> list[Message]:
    """The session's messages as the model saw them: each call the model made has one
    result. A gate's result (``<call id>:approval`` or ``:input``) answers the call when the
    call has none of its own but the request for the gate; otherwise it is dropped."""
    called = {p.call_id for m in messages for p in m.parts if isinstance(p, ToolCallPart)}
    results = [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]
    real = {p.call_id for p in results if p.call_id in called and _gate_of(p) is None}
    gates = {p.call_id: base for p in results if (base := _base_of(p.call_id, called)) is not None}
    if not gates:
        return list(messages)
    answering = {
        call_id: base for call_id, base in gates.items() if base not in real
    }  # the last gate result of a call wins, as the agent saw it
    last = {base: call_id for call_id, base in answering.items()}
    repaired: list[Message] = []
    for message in messages:
        parts: list[Part] = []
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                if part.call_id in called and _gate_of(part) is not None and part.call_id in last:
                    continue  # the request for a gate, which the model never saw
                if part.call_id in gates:
                    base = gates[part.call_id]
                    if last.get(base) != part.call_id:
                        continue  # a gate passed before the call ran under its own id
                    part = part.model_copy(update={"call_id": base})
            parts.append(part)
        if parts:
            repaired.append(message.model_copy(update={"parts": tuple(parts)}))
    return repaired


def _base_of(call_id: str, called: set[str]) -> str | None:
    base, _, gate = call_id.rpartition(":")
    return base if gate in _GATES and base in called and call_id not in called else None


def _gate_of(part: ToolResultPart) -> str | None:
    gate = part.data.get(DEFERRED) if isinstance(part.data, dict) else None
    return gate if isinstance(gate, str) and gate in _GATES else None
