"""The HTTP API's wire models: each route's request body and answer, and the small types they
hold (a :class:`SessionState`, a :class:`Budget`...), light enough for a client to load
without the server (no FastAPI, no engine, no store: docs/architecture.md §2).

The server answers with these (``/openapi.json`` is generated from them), :mod:`tether.client`
reads and writes them, and :mod:`tether.http` exports them too, so a client and the server
hold one description of the wire.

Example::

    from tether.wire import DispatchBody

    body = DispatchBody(body="What is Tether?", session="support")
    print(body.model_dump_json(by_alias=True, exclude_unset=True))
"""

from tether._budget import Budget
from tether._inbound import InboundKind, SignalInfo
from tether._payloads import SettlementStatus
from tether._states import Decision, GateStatus, SessionState, SubmissionStatus, WebhookStatus
from tether.wire._base import RequestBody, WireResponse, optional
from tether.wire._gates import (
    AnswerReceipt,
    BudgetGateItem,
    BudgetGatesPage,
    BudgetReceipt,
    BudgetStatus,
    InputItem,
    InputsPage,
    InputStatus,
)
from tether.wire._logged import RecordEnvelope
from tether.wire._requests import (
    AnswerBody,
    BudgetDecisionBody,
    CallbackBody,
    DecisionBody,
    DispatchBody,
    ForkBody,
    MessageBody,
    MetadataPatch,
    SessionBody,
)
from tether.wire._responses import (
    Aborted,
    Alive,
    ApprovalItem,
    ApprovalsPage,
    DecisionReceipt,
    DependencyItem,
    DispatchAccepted,
    DispatchSettled,
    Forked,
    IdentityView,
    MessagesPage,
    Ready,
    RecordsPage,
    Settlement,
    SubmissionReceipt,
    Verified,
)
from tether.wire._schedules import ScheduleBody, ScheduleDeleted, ScheduleItem, SchedulesPage
from tether.wire._sessions import (
    AgentItem,
    AgentsPage,
    ChildUsageView,
    ConversationView,
    ErasedView,
    MetadataView,
    SessionItem,
    SessionParent,
    SessionsPage,
    SessionUsage,
)
from tether.wire._spans import SpanKind, SpansPage, SpanStatus, SpanView
from tether.wire._submissions import (
    AttemptView,
    ChildSubmission,
    HeldBy,
    OpenSubmissions,
    SubmissionTreeNode,
    SubmissionView,
    UsageView,
)
from tether.wire._usage import (
    SessionUsageReport,
    SubmissionUsageReport,
    UsageAmounts,
    UsageAnswer,
    UsageLimits,
    UsageReport,
)
from tether.wire._versions import UpgradeBody, UpgradeResult, VersionItem, VersionsPage
from tether.wire._webhooks import WebhookDeliveriesPage, WebhookDeliveryItem

__all__ = (
    "Aborted",
    "AgentItem",
    "AgentsPage",
    "Alive",
    "AnswerBody",
    "AnswerReceipt",
    "ApprovalItem",
    "ApprovalsPage",
    "AttemptView",
    "Budget",
    "BudgetDecisionBody",
    "BudgetGateItem",
    "BudgetGatesPage",
    "BudgetReceipt",
    "BudgetStatus",
    "CallbackBody",
    "ChildSubmission",
    "ChildUsageView",
    "ConversationView",
    "Decision",
    "DecisionBody",
    "DecisionReceipt",
    "DependencyItem",
    "DispatchAccepted",
    "DispatchBody",
    "DispatchSettled",
    "ErasedView",
    "ForkBody",
    "Forked",
    "GateStatus",
    "HeldBy",
    "IdentityView",
    "InboundKind",
    "InputItem",
    "InputStatus",
    "InputsPage",
    "MessageBody",
    "MessagesPage",
    "MetadataPatch",
    "MetadataView",
    "OpenSubmissions",
    "Ready",
    "RecordEnvelope",
    "RecordsPage",
    "RequestBody",
    "ScheduleBody",
    "ScheduleDeleted",
    "ScheduleItem",
    "SchedulesPage",
    "SessionBody",
    "SessionItem",
    "SessionParent",
    "SessionState",
    "SessionUsage",
    "SessionUsageReport",
    "SessionsPage",
    "Settlement",
    "SettlementStatus",
    "SignalInfo",
    "SpanKind",
    "SpanStatus",
    "SpanView",
    "SpansPage",
    "SubmissionReceipt",
    "SubmissionStatus",
    "SubmissionTreeNode",
    "SubmissionUsageReport",
    "SubmissionView",
    "UpgradeBody",
    "UpgradeResult",
    "UsageAmounts",
    "UsageAnswer",
    "UsageLimits",
    "UsageReport",
    "UsageView",
    "Verified",
    "VersionItem",
    "VersionsPage",
    "WebhookDeliveriesPage",
    "WebhookDeliveryItem",
    "WebhookStatus",
    "WireResponse",
    "optional",
)
