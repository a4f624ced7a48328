"""The keyless demo agents ``assistant`` and ``researcher``, which ``tether serve --demo``
registers, with ``assistant`` allowed to delegate to ``researcher``.

Example::

    from tether.demo import demo_agents, demo_subagents

    async with Runtime(demo_agents(), "memory://", subagents=demo_subagents()) as runtime:
        receipt = await runtime.dispatch("assistant", "me", "what time is it?")
        receipt = await runtime.dispatch("assistant", "me", "ask the researcher about tides")
"""

from tether.demo._assistant import (
    assistant,
    demo_agents,
    demo_subagents,
    demo_tools,
    researcher,
)

__all__ = ("assistant", "demo_agents", "demo_subagents", "demo_tools", "researcher")
