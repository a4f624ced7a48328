"""What the coordinator and its attempts work with: the narrow parts of a started runtime.

The :class:`Runtime` builds one context when it starts and hands it to the coordinator, which
hands it to every attempt; neither sees the runtime itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tether.engine._agents import AgentDefinition
from tether.engine._clock import Clock
from tether.engine._config import RuntimeConfig
from tether.engine._limits import LimitGate
from tether.engine._metrics import EngineMetrics
from tether.engine._observe import Instrumentation
from tether.engine._redact import Redactor
from tether.engine._runs import RunRegistry
from tether.engine._steering import SteerWatches
from tether.engine._subagents import SubagentPolicy
from tether.engine._tenant_budget import TenantBudgetGate
from tether.engine._versions import AgentVersions
from tether.engine._views import ViewCache
from tether.models import ModelCallPolicy
from tether.store import Store, StoreCapabilities

__all__ = ("EngineContext",)


@dataclass(frozen=True, slots=True)
class EngineContext:
    """A started runtime's store (with its capabilities, detected once at start), agent
    registry, settings, observers, redactor, clock, and the shared state of this process's
    runs: their registry (the wake-up hub), steering watches and log views; and how model
    calls are bounded and retried (the configured timeout and retry policy, on the clock);
    the metrics its runs count."""

    store: Store
    capabilities: StoreCapabilities
    agents: Mapping[str, AgentDefinition]
    versions: AgentVersions
    config: RuntimeConfig
    instrumentation: Instrumentation
    redact: Redactor
    clock: Clock
    runs: RunRegistry
    steering: SteerWatches
    views: ViewCache
    subagents: SubagentPolicy
    model_calls: ModelCallPolicy
    metrics: EngineMetrics
    limits: LimitGate
    tenant_budgets: TenantBudgetGate

    @property
    def closing(self) -> bool:
        return self.runs.closing
