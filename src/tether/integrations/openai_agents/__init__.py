"""OpenAI Agents SDK integration: a stream tap and a durable adapter.

The tap turns ``Runner.run_streamed(...).stream_events()`` into Tether's canonical stream;
:class:`TetherSession` is the SDK's ``Session`` kept in a Tether session's log; the adapter
runs an ``agents.Agent`` as a Tether harness whose model calls and function
tools go through the journal (resume after ``kill -9``, replay with zero model calls, fork,
approvals for tools with ``needs_approval``), guardrails' checker agents and other runs nested
in the durable one included. What cannot be journaled (local shell, computer and patch
tools, SDK sessions, conversations held by the provider...) is refused with
:class:`UnsupportedConstruct`.

Example::

    from agents import Agent, Runner, function_tool
    from tether.integrations.openai_agents import OpenAIAgentsTurn, durable
    from tether.stream import UnifiedEmitter

    @function_tool
    def lookup(order_id: str) -> str:
        return "shipped"

    support = Agent(name="support", instructions="Help.", tools=[lookup], model="gpt-4.1")

    def agents():                                # tether serve --app myapp:agents
        return {"support": durable(support)}

    turn = OpenAIAgentsTurn(Runner.run_streamed(support, "where is 42?"), model="gpt-4.1")
    async for event in UnifiedEmitter().yield_turn(turn):
        ...
"""

from tether.integrations.openai_agents._adapter import (
    OpenAIAgentsHarness,
    durable,
    journaled_agent,
)
from tether.integrations.openai_agents._model import JournaledModel
from tether.integrations.openai_agents._refuse import UnsupportedConstruct
from tether.integrations.openai_agents._session import TetherSession
from tether.integrations.openai_agents._tap import OpenAIAgentsTurn, convert_openai_agents_events

__all__ = (
    "JournaledModel",
    "OpenAIAgentsHarness",
    "OpenAIAgentsTurn",
    "TetherSession",
    "UnsupportedConstruct",
    "convert_openai_agents_events",
    "durable",
    "journaled_agent",
)
