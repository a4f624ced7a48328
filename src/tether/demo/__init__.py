"""The keyless demo agent ``assistant``, which ``tether serve --demo`` registers.

Example::

    from tether.demo import demo_agents

    async with Runtime(demo_agents(), store="memory://") as runtime:
        receipt = await runtime.dispatch("assistant", "me", "what time is it?")
"""

from tether.demo._assistant import assistant, demo_agents, demo_tools

__all__ = ("assistant", "demo_agents", "demo_tools")
