"""What the framework integrations share about a framework's own MCP servers: which of a
server's tools need a human's approval and which are safe to call again, decided from the
server's annotations or by name, and a listing a run saw compared with the one it sees now.

A framework lists its MCP servers' tools at every turn of its loop; each listing is a
recorded step, so a replay asks no server. Within one run the tools must stay those its
first listing recorded: a server that offers others (found live, after a resume or a
restart of the server) is :class:`~tether.errors.McpToolsChanged`, a divergence, rather
than tools the model never saw.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from pydantic import JsonValue

from tether.errors import McpToolsChanged

__all__ = ("McpApproval", "McpIdempotence", "check_unchanged", "needs_approval", "safe_again")

McpApproval = bool | Collection[str] | Literal["destructive"]
"""Which MCP tools wait for a human: ``"destructive"`` those annotated ``destructiveHint``
(and not ``readOnlyHint``), ``True`` all, ``False`` none, or a collection of tool names."""
McpIdempotence = bool | Collection[str] | Literal["hints"]
"""Which MCP tools recovery may call again: ``"hints"`` those annotated ``readOnlyHint`` or
``idempotentHint``, ``True`` all, ``False`` none, or a collection of tool names."""


def _hints(annotations: object) -> dict[str, object]:
    return annotations if isinstance(annotations, dict) else {}


def _decide(policy: object, tool: str, by_hints: str, hinted: bool) -> bool:
    if policy == by_hints:
        return hinted
    if isinstance(policy, bool):
        return policy
    assert isinstance(policy, Collection)
    return tool in policy


def needs_approval(policy: McpApproval, tool: str, annotations: object) -> bool:
    """Whether a call of ``tool`` (annotated ``annotations``, the MCP wire dict) waits for
    a human under ``policy``."""
    hints = _hints(annotations)
    destructive = hints.get("destructiveHint") is True and hints.get("readOnlyHint") is not True
    return _decide(policy, tool, "destructive", destructive)


def safe_again(policy: McpIdempotence, tool: str, annotations: object) -> bool:
    """Whether ``tool`` may be called again after a crash cut its call, under ``policy``."""
    hints = _hints(annotations)
    hinted = hints.get("readOnlyHint") is True or hints.get("idempotentHint") is True
    return _decide(policy, tool, "hints", hinted)


def check_unchanged(
    server: str, execution_id: str, then: list[JsonValue], now: list[JsonValue]
) -> None:
    """Raise :class:`~tether.errors.McpToolsChanged` when the listing ``now`` (each entry
    a tool's JSON, with its ``name``) is not the listing ``then`` the run recorded first."""
    if now == then:
        return

    def by_name(entries: list[JsonValue]) -> dict[str, JsonValue]:
        return {str(e["name"]): e for e in entries if isinstance(e, dict)}

    before, after = by_name(then), by_name(now)
    raise McpToolsChanged(
        server,
        execution_id=execution_id,
        added=tuple(sorted(after.keys() - before.keys())),
        removed=tuple(sorted(before.keys() - after.keys())),
        changed=tuple(sorted(n for n in before.keys() & after.keys() if before[n] != after[n])),
    )
