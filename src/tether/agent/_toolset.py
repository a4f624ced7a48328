"""Toolsets: tools the built-in agent finds at run time (an MCP server's), whose listing each
execution journals as a step, so that replay offers the model what the run offered it and
asks the toolset for nothing."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Final

from pydantic import JsonValue

from tether.agent._tools import Tool

__all__ = ("TOOLSET_STEP", "Toolset")

TOOLSET_STEP: Final = "tether.toolset:"
"""The prefix of the step an execution records a toolset's listing in: its name follows."""


class Toolset(ABC):
    """Tools known only once the run asks (an MCP server's: ``tether.tools.mcp``).

    At the start of each execution the agent records :meth:`list_tools`' answer as the step
    ``tether.toolset:<name>``; the execution's tools are :meth:`tools` of that listing, the
    one recorded (served again on recovery and replay, where :meth:`list_tools` is not
    called) or the one just made. :meth:`release` is called when the execution's run ends,
    however it ends (a park or a crash included), to stop what the toolset started for it.

    Example::

        agent_spec(model, tools=[*workspace("."), mcp(command=["my-mcp-server"])])
    """

    name: str
    """Unique among an agent's toolsets: it names the step."""

    @abstractmethod
    async def list_tools(self, execution_id: str) -> JsonValue:
        """The tools offered now, as JSON (what the step records)."""

    @abstractmethod
    def tools(self, listing: JsonValue, execution_id: str) -> Sequence[Tool]:
        """The tools of a listing, bound to an execution."""

    @abstractmethod
    async def release(self, execution_id: str) -> None:
        """The execution's run ended: stop what was started for it (nothing if nothing was)."""

    def pins(self) -> JsonValue:
        """What pins this toolset for the agent's version (docs/versions.md): by default its
        name; the tools themselves are recorded per execution."""
        return self.name
