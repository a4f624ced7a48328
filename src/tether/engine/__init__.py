"""The durable submission engine (docs/architecture.md §6): admitted work is never lost and
never settles twice, however processes die.

Example::

    from tether.engine import AgentDefinition, AgentSpec, Runtime

    agents = {"assistant": AgentDefinition(lambda instance, env: AgentSpec(harness=MyHarness()))}
    async with Runtime(agents, store="sqlite:///./tether-data") as runtime:
        receipt = await runtime.dispatch("assistant", "acme", "hello")
        print(await runtime.wait(receipt.submission_id))
"""

from typing import Any

from tether._moved import moved
from tether.engine._agents import (
    AgentDefinition,
    AgentSpec,
    Summarizer,
    VersionPolicy,
    build_spec,
)
from tether.engine._app import App, AppAgents
from tether.engine._approvals import MAX_APPROVALS_PAGE, ApprovalPage
from tether.engine._budget import BUDGET_EXHAUSTED, Budget, BudgetExhausted
from tether.engine._clock import Clock, ManualClock, SystemClock
from tether.engine._config import RuntimeConfig
from tether.engine._delays import MAX_DELAY
from tether.engine._delegation import TASK_TOOL, TASK_WAIT_EXCEEDED, TaskArgs, task_tool
from tether.engine._fork import Fork
from tether.engine._health import Dependency, DependencyState, HealthReporter
from tether.engine._inbound import Inbound, InboundKind, SignalInfo
from tether.engine._limits import LIMIT, Limits
from tether.engine._memory import Embed, Memory, memory_text
from tether.engine._metrics import (
    INSTRUMENTS,
    EngineMetrics,
    HistogramValue,
    Instrument,
    MetricSink,
    MetricsSnapshot,
)
from tether.engine._observe import (
    ApprovalDecidedEvent,
    AttemptStarted,
    Compacted,
    Correlation,
    DeltaReceived,
    EngineEvent,
    InputAnsweredEvent,
    Interceptor,
    ModelCallFailed,
    Observer,
    Operation,
    OperationEnded,
    OperationStarted,
    RecoveryDecided,
    SubmissionAdmitted,
    SubmissionClaimed,
    SubmissionResumed,
    SubmissionSettledEvent,
    SubmissionSpawned,
    SubmissionWaiting,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnStarted,
    WebhookAttempted,
)
from tether.engine._progress import ProgressHub, ProgressSubscription
from tether.engine._pruner import PruneAction, PruneOutcome, PruneReport
from tether.engine._receipts import Multitask, Receipt, SubmissionInfo
from tether.engine._redact import Redactor, SecretRedactor
from tether.engine._results import RESULT_CORRECTION
from tether.engine._retention import Retention
from tether.engine._rollout import NO_WORKER_FOR_VERSION, VersionState
from tether.engine._runtime import Runtime
from tether.engine._schedules import (
    MAX_CATCH_UP,
    MAX_PERIOD,
    InvalidSchedule,
    Schedule,
    ScheduleConflict,
    ScheduleInfo,
    ScheduleNotFound,
)
from tether.engine._session_usage import SessionSpend, SubmissionSpend
from tether.engine._sessions import MAX_SESSIONS_PAGE, SessionInfo, SessionPage, SessionState
from tether.engine._settle import (
    ABORTED,
    ATTEMPT_BUDGET_EXHAUSTED,
    CANCELLED_BY_PARENT,
    RESULT_SCHEMA_INVALID,
    RUN_FAILED,
    SETTLEMENT_INDETERMINATE,
    TIMEOUT_EXCEEDED,
)
from tether.engine._subagents import SubagentLimits, SubagentPolicy
from tether.engine._subtree import MAX_TREE_NODES, SubmissionTree
from tether.engine._tenant_budget import TenantBudget, TenantUsage
from tether.engine._upgrade_check import UpgradeCheck
from tether.engine._usage import ChildUsage, UsageTotals
from tether.engine._versions import (
    VERSION_DIVERGED,
    AgentVersion,
    AgentVersions,
    pins_of,
    version_digest,
)
from tether.engine._webhooks import (
    Callback,
    WebhookNotFound,
    WebhookSettings,
    WebhookSubscription,
)

__all__ = (
    "ABORTED",
    "ATTEMPT_BUDGET_EXHAUSTED",
    "BUDGET_EXHAUSTED",
    "CANCELLED_BY_PARENT",
    "INSTRUMENTS",
    "LIMIT",
    "MAX_APPROVALS_PAGE",
    "MAX_CATCH_UP",
    "MAX_DELAY",
    "MAX_PERIOD",
    "MAX_SESSIONS_PAGE",
    "MAX_TREE_NODES",
    "NO_WORKER_FOR_VERSION",
    "RESULT_CORRECTION",
    "RESULT_SCHEMA_INVALID",
    "RUN_FAILED",
    "SETTLEMENT_INDETERMINATE",
    "TASK_TOOL",
    "TASK_WAIT_EXCEEDED",
    "TIMEOUT_EXCEEDED",
    "VERSION_DIVERGED",
    "AgentDefinition",
    "AgentSpec",
    "AgentVersion",
    "AgentVersions",
    "App",
    "AppAgents",
    "ApprovalDecidedEvent",
    "ApprovalPage",
    "AttemptStarted",
    "Budget",
    "BudgetExhausted",
    "Callback",
    "ChildUsage",
    "Clock",
    "Compacted",
    "Correlation",
    "DeltaReceived",
    "Dependency",
    "DependencyState",
    "Embed",
    "EngineEvent",
    "EngineMetrics",
    "Fork",
    "HealthReporter",
    "HistogramValue",
    "Inbound",
    "InboundKind",
    "InputAnsweredEvent",
    "Instrument",
    "Interceptor",
    "InvalidSchedule",
    "Limits",
    "ManualClock",
    "Memory",
    "MetricSink",
    "MetricsSnapshot",
    "ModelCallFailed",
    "Multitask",
    "Observer",
    "Operation",
    "OperationEnded",
    "OperationStarted",
    "ProgressHub",
    "ProgressSubscription",
    "PruneAction",
    "PruneOutcome",
    "PruneReport",
    "Receipt",
    "RecoveryDecided",
    "Redactor",
    "Retention",
    "Runtime",
    "RuntimeConfig",
    "Schedule",
    "ScheduleConflict",
    "ScheduleInfo",
    "ScheduleNotFound",
    "SecretRedactor",
    "SessionInfo",
    "SessionPage",
    "SessionSpend",
    "SessionState",
    "SignalInfo",
    "SubagentLimits",
    "SubagentPolicy",
    "SubmissionAdmitted",
    "SubmissionClaimed",
    "SubmissionInfo",
    "SubmissionResumed",
    "SubmissionSettledEvent",
    "SubmissionSpawned",
    "SubmissionSpend",
    "SubmissionTree",
    "SubmissionWaiting",
    "Summarizer",
    "SystemClock",
    "TaskArgs",
    "TenantBudget",
    "TenantUsage",
    "ToolEnded",
    "ToolProgress",
    "ToolStarted",
    "TurnEnded",
    "TurnStarted",
    "UpgradeCheck",
    "UsageTotals",
    "VersionPolicy",
    "VersionState",
    "WebhookAttempted",
    "WebhookNotFound",
    "WebhookSettings",
    "WebhookSubscription",
    "build_spec",
    "memory_text",
    "pins_of",
    "task_tool",
    "version_digest",
)

_MOVED = {
    "ApprovalDecided": "tether.engine:ApprovalDecidedEvent",
    "SubmissionSettled": "tether.engine:SubmissionSettledEvent",
}
"""Engine events renamed apart from the record payloads of the same names in
:mod:`tether.records`; the old names still import, with a warning."""


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)
