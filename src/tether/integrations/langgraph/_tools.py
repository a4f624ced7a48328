"""Journaled tools: a LangChain tool whose calls run at most once per recorded call id."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.store.base import BaseStore
from pydantic import JsonValue

from tether.integrations._bridge import journaled_tool, tool_call
from tether.integrations.langgraph._convert import tool_message_of, tool_result_of
from tether.integrations.langgraph._errors import refuse
from tether.integrations.langgraph._store import tool_steps
from tether.journal import ToolPolicy, ToolScope
from tether.messages import Mediation, ToolCall, ToolResult

__all__ = ("JOURNALED_TAG", "JournaledTool")

JOURNALED_TAG = "tether:journaled"
"""The tag a journaled tool's own run carries (and what it calls inherits): the journal
keeps its outcome, so the models and tools it calls in turn are not the graph's to refuse."""


class JournaledTool(BaseTool):
    """Wraps ``inner`` so a graph's ``ToolNode`` runs it through the journal.

    The idempotency key derives from the model's tool call id, which the journal recorded, so
    a resumed run never repeats a finished call. The graph gets the ToolMessage rebuilt from
    the journaled outcome. A tool is called with a LangChain ``ToolCall`` (as ``ToolNode``
    does); invoking it with bare arguments has no call id to journal under and fails.
    """

    inner: BaseTool
    mediation: Mediation = Mediation.HOST
    idempotent: bool = False
    policy: ToolPolicy | None = None

    @classmethod
    def wrap(
        cls,
        tool: BaseTool,
        *,
        mediation: Mediation = Mediation.HOST,
        idempotent: bool = False,
        policy: ToolPolicy | None = None,
    ) -> JournaledTool:
        return cls(
            name=tool.name,
            description=tool.description,
            args_schema=tool.args_schema,
            return_direct=tool.return_direct,
            inner=tool,
            mediation=mediation,
            idempotent=idempotent,
            policy=policy,
        )

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a journaled tool runs in async graphs (ainvoke / astream)")

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a journaled tool is invoked with a ToolCall (as ToolNode does)")

    async def ainvoke(
        self, input: str | dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> ToolMessage:
        if not (isinstance(input, dict) and input.get("type") == "tool_call" and input.get("id")):
            raise TypeError(
                f"{self.name}: a journaled tool needs a ToolCall with an id (as ToolNode passes)"
            )
        given: dict[str, Any] = dict(input.get("args") or {})
        # The store ToolNode injects (InjectedStore) is no argument of the model's: the call
        # is journaled without it, and the tool is given it back when it runs.
        injected = {name: value for name, value in given.items() if isinstance(value, BaseStore)}
        args: dict[str, JsonValue] = {k: v for k, v in given.items() if k not in injected}
        call = tool_call(
            str(input["id"]),
            self.name,
            args,
            mediation=self.mediation,
            idempotent=self.idempotent,
        )

        async def native(call: ToolCall, scope: ToolScope) -> ToolResult:
            request = {
                "type": "tool_call",
                "id": call.call_id,
                "name": self.name,
                "args": {**call.args, **injected},
            }
            tagged = merge_configs(config, {"tags": [JOURNALED_TAG]})
            try:
                with tool_steps(scope):
                    answer = await self.inner.ainvoke(request, tagged)
            except GraphBubbleUp as exc:
                # An interrupt() (or a Command to the parent graph) from inside a journaled
                # call: its outcome could never be recorded, and a resume would re-run it.
                refuse(
                    f"tool {self.name!r} raised {type(exc).__name__} (interrupt() or a Command "
                    "from inside a tool): call interrupt() in a node, or list the tool in "
                    "approval_tools= to have a person decide on it"
                )
            if not isinstance(answer, ToolMessage):
                refuse(
                    f"tool {self.name!r} returned {type(answer).__name__}; a durable tool must "
                    "answer with content (a Command or other object cannot be journaled)"
                )
            return tool_result_of(answer, call.call_id)

        result = await journaled_tool(call, native, policy=self.policy)
        return tool_message_of(result, self.name)

    def invoke(
        self, input: str | dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        raise NotImplementedError("a journaled tool runs in async graphs (ainvoke / astream)")
