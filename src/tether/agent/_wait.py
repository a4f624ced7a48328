"""The built-in agent's ``wait_until`` tool, offered when the application allows it
(``Agent(timers=True)``): the model pauses the conversation durably until a time, or for a
number of seconds; the run parks without a lease and the engine wakes it then."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from tether.agent._tools import Tool, ToolArgumentsError, ToolContext, tool
from tether.engine import MAX_DELAY

__all__ = ("WAIT_TOOL", "wait_tool")

WAIT_TOOL: Final = "wait_until"


async def wait_until(
    ctx: ToolContext, until: str | None = None, seconds: float | None = None
) -> str:
    """Pause this conversation durably, doing nothing, until a time (``until``: RFC 3339
    with an offset, e.g. 2030-01-01T09:00:00+00:00) or for ``seconds``; give one of them.
    The conversation goes on from here once the time has come."""
    if (until is None) == (seconds is None):
        raise ToolArgumentsError("give exactly one of until or seconds")
    when: datetime | timedelta
    if seconds is not None:
        if not 0 <= seconds <= MAX_DELAY.total_seconds():
            raise ToolArgumentsError(f"seconds must be within 0..{int(MAX_DELAY.total_seconds())}")
        when = timedelta(seconds=seconds)
    else:
        assert until is not None
        try:
            when = datetime.fromisoformat(until)
        except ValueError:
            raise ToolArgumentsError(f"until is not an RFC 3339 time: {until!r}") from None
        if when.tzinfo is None:
            raise ToolArgumentsError("until needs an offset (RFC 3339), e.g. +00:00")
    await ctx.sleep(when)
    return f"Waited {'until ' + until if until is not None else f'{seconds:g} seconds'}."


def wait_tool() -> Tool:
    """The ``wait_until`` tool (idempotent: it is run again when it wakes, its sleep served)."""
    return tool(name=WAIT_TOOL, idempotent=True)(wait_until)
