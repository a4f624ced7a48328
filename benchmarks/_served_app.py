"""The agents ``benchmarks/postgres.py`` serves with ``tether worker``:

    tether worker --store postgresql://... --app benchmarks._served_app:agents

``one`` and ``three``: the built-in agent with the fake model of ``benchmarks/peers/_fake.py``
(zero latency, 300-byte messages) and its idempotent ``lookup`` tool, called once (``one``) or
in each of three turns (``three``) before the final answer, as DBOS's workflow does
(``benchmarks/peers/dbos_queue.py``).
"""

from __future__ import annotations

from benchmarks._workloads import TURNS
from benchmarks.peers.tether_side import FakeModel, lookup
from tether.agent import agent_spec
from tether.engine import AgentDefinition

__all__ = ("agents",)


def _definition(turns: int) -> AgentDefinition:
    spec = agent_spec(FakeModel(turns), model_name="bench", tools=[lookup], max_rounds=turns + 2)
    return AgentDefinition(lambda instance, env: spec)


def agents() -> dict[str, AgentDefinition]:
    return {name: _definition(turns) for name, turns in TURNS.items()}
