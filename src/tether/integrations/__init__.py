"""Durable adapters: run a pydantic-ai, LangGraph or OpenAI Agents agent as a Tether harness.

The framework keeps driving its own loop; its model calls and tool calls go through the
journal, so a run resumes after ``kill -9`` without repeating a recorded model call, replays
with zero model calls, forks, and parks for approvals. Each framework lives in its own
subpackage behind its extra (``tether.integrations.pydantic_ai``, ``.langgraph``,
``.openai_agents``); this package imports none of them.

Example::

    from tether.integrations.pydantic_ai import durable

    def agents():
        return {"support": durable(support_agent)}   # tether serve --app myapp:agents
"""

from tether.integrations._bridge import (
    NativeModelCall,
    NativeToolCall,
    NotInTurn,
    current_turn,
    durable_definition,
    journaled_model,
    journaled_tool,
    step,
    tool_call,
    turn_scope,
)

__all__ = (
    "NativeModelCall",
    "NativeToolCall",
    "NotInTurn",
    "current_turn",
    "durable_definition",
    "journaled_model",
    "journaled_tool",
    "step",
    "tool_call",
    "turn_scope",
)
