"""What an agent is to the engine: the definition a runtime registers under a name, and the
spec its initializer returns for each claim (the harness, and the model and tools it may use)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tether.engine._budget import Budget, check_session_budget
from tether.engine._limits import Limits
from tether.journal import Harness, ToolExecutor
from tether.messages import Message
from tether.models import Model, ModelRetryPolicy

__all__ = (
    "AgentDefinition",
    "AgentSpec",
    "Initializer",
    "Summarizer",
    "VersionPolicy",
    "build_spec",
)

Summarizer = Callable[[list[Message]], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """What an agent runs for one claim: its harness, and the model and tools it may use.

    ``summarize`` turns a transcript into a summary for compaction (optional).
    ``model_timeout`` (seconds a model call may go without a byte of its answer) and
    ``model_retry`` (how a failed call is tried again within the call) override the
    runtime's for this agent's model calls (docs/models.md).

    Example::

        AgentSpec(harness=agent, model=model, model_timeout=60,
                  model_retry=ModelRetryPolicy(retries=2, max_elapsed=30))
    """

    harness: Harness
    model: Model | None = None
    tools: ToolExecutor | None = None
    summarize: Summarizer | None = None
    model_timeout: float | None = None
    model_retry: ModelRetryPolicy | None = None


Initializer = Callable[[str, Mapping[str, str]], "AgentSpec | Awaitable[AgentSpec]"]

VersionPolicy = Literal["pinned", "upgrade", "strict"]
"""What a run started on one version of an agent does once another is deployed
(docs/versions.md): ``pinned`` runs only on a worker that serves its version; ``upgrade``
goes on with the newest code from its recorded prefix, journaling the change; ``strict`` is
pinned and fails a run whose recorded model input no longer matches."""


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    """A named agent: ``initialize(instance_id, env)`` runs on every claim and returns the spec.

    The durability policy is static (readable without running user code), so the budget
    and the deadline are checked before the initializer runs. ``None`` takes the
    runtime's default.

    Example::

        AgentDefinition(lambda instance, env: AgentSpec(harness=Helper(instance)), max_attempts=5)

    Two versions served side by side, the newest taking new runs::

        AgentDefinition(build_v2, version="v2", previous=[AgentDefinition(build_v1, version="v1")])
    """

    initialize: Initializer
    max_attempts: int | None = None
    timeout: float | None = None
    description: str | None = None
    """What the agent is for: shown to a parent agent's model in its task tool, to route by."""
    version: str | None = None
    """The version's name; by default a digest of what the journal pins (the harness, its
    system prompt, tool schemas and model), as the initializer builds them for a probe
    instance (docs/versions.md)."""
    budget: Budget | None = None
    """Limits on each submission's spending (docs/budgets.md); a dispatch's own override
    them limit by limit, and they override the application's (``RuntimeConfig.budget``)."""
    session_budget: Budget | None = None
    """Limits on what each session of this agent spends, all its submissions together
    (docs/budgets.md), over the application's (``RuntimeConfig.session_budget``) limit by
    limit; no ``wall_time`` (a session may sit idle for weeks between messages)."""
    priority: int | None = None
    """The priority of its submissions where a dispatch sets none (docs/priorities.md):
    higher is claimed first; ``None``: 0. A subagent's task inherits its parent's."""
    limits: Limits | None = None
    """Limits on this agent's runs in flight (``concurrency`` across workers, ``per_worker``
    on one) and on its runs' model calls (``rate``, ``tokens_per_minute``): docs/limits.md."""
    policy: VersionPolicy = "pinned"
    """What a run started on another version of this agent does here."""
    previous: Sequence[AgentDefinition] = ()
    """Older versions this process still runs, newest first: their started runs finish on
    their own code while new runs start on this one."""

    def __post_init__(self) -> None:
        check_session_budget(self.session_budget)


async def build_spec(
    definition: AgentDefinition, agent: str, instance: str, env: Mapping[str, str]
) -> AgentSpec:
    """What ``definition``'s initializer builds for ``instance``, awaited if it is async; an
    initializer that returns anything but an :class:`AgentSpec` is user code gone wrong: a
    ``TypeError`` that names ``agent``, not an assert."""
    spec = definition.initialize(instance, env)
    if inspect.isawaitable(spec):
        spec = await spec
    built: object = spec
    if not isinstance(built, AgentSpec):
        raise TypeError(
            f"the initializer of agent {agent!r} returned {type(built).__name__}, not an AgentSpec"
        )
    return built
