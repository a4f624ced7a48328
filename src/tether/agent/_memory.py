"""The built-in agent's ``remember`` and ``recall`` tools, offered when the application gives
the agent a long-term memory (``Agent(memory=AgentMemory(...))``): the model keeps facts
across sessions and finds them again. Every read and write is a journaled step of the tool
call, so a replay or a resume gets what the run saw (docs/memory.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from pydantic import JsonValue

from tether.agent._tools import Tool, ToolArgumentsError, ToolContext, tool
from tether.engine import Memory

__all__ = ("MEMORY_TOOLS", "RECALL_TOOL", "REMEMBER_TOOL", "AgentMemory", "memory_tools")

REMEMBER_TOOL: Final = "remember"
RECALL_TOOL: Final = "recall"
MEMORY_TOOLS: Final = (REMEMBER_TOOL, RECALL_TOOL)


def by_identity(ctx: ToolContext) -> tuple[str, ...]:
    """The default namespace: the tenant and the subject of who asked (``default`` and
    ``anonymous`` when no one signed in), so one user's memory is not another's."""
    identity = ctx.identity
    if identity is None:
        return ("default", "anonymous")
    return (identity.tenant or "default", identity.subject)


@dataclass(frozen=True)
class AgentMemory:
    """What the built-in agent remembers with: ``memory`` (a :class:`tether.Memory`) and the
    ``namespace`` its tools use, a tuple or a function of the tool call's context (default:
    the tenant and subject of who asked). ``recall_limit``: the most facts one recall
    returns.

    Example::

        memory = tether.Memory(lambda: runtime.store, embed=embed)
        Agent(model="gpt-4o", memory=AgentMemory(memory, namespace=lambda ctx: ("acme", "bot")))
    """

    memory: Memory
    namespace: Sequence[str] | Callable[[ToolContext], Sequence[str]] = field(default=by_identity)
    recall_limit: int = 5

    def namespace_of(self, ctx: ToolContext) -> tuple[str, ...]:
        """The namespace of one tool call."""
        chosen = self.namespace(ctx) if callable(self.namespace) else self.namespace
        return tuple(chosen)


def memory_tools(options: AgentMemory) -> list[Tool]:
    """The ``remember`` and ``recall`` tools on ``options``' memory."""

    async def remember(ctx: ToolContext, key: str, fact: str) -> str:
        """Remember a fact for later conversations under a short key (a key already used
        is replaced). Use it for what the user wants kept: preferences, names, decisions."""
        if not key.strip() or not fact.strip():
            raise ToolArgumentsError("give a non-empty key and fact")
        memory = options.memory.journaled(ctx.step, numbered=True)
        await memory.put(options.namespace_of(ctx), key.strip(), fact)
        return f"Remembered {key.strip()!r}."

    async def recall(ctx: ToolContext, query: str) -> list[dict[str, JsonValue]]:
        """Recall facts remembered in earlier conversations that match a query (a few
        words about what you are looking for); the most relevant first."""
        memory = options.memory.journaled(ctx.step, numbered=True)
        hits = await memory.search(options.namespace_of(ctx), query, limit=options.recall_limit)
        return [{"key": hit.item.key, "fact": hit.item.value} for hit in hits]

    return [
        tool(name=REMEMBER_TOOL, idempotent=True)(remember),
        tool(name=RECALL_TOOL, idempotent=True)(recall),
    ]
