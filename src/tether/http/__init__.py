"""The HTTP/SSE face of a runtime (docs/architecture.md §7): ``create_app(runtime)`` is an ASGI app.

Example::

    from tether.http import create_app

    app = create_app(Runtime(agents, store="sqlite:///./tether-data"), manage_runtime=True)

Every route takes the runtime it calls from ``runtime_dependency``, which an app's
``dependency_overrides`` can replace.

The wire models (each route's request body and answer, and the error envelope) are exported
too: ``/openapi.json`` is generated from them, and :mod:`tether.client` reads and writes
them, so a client and the server hold one description of the wire.
"""

from tether.http._app import create_app
from tether.http._budget_views import BudgetGateItem, BudgetGatesPage, BudgetReceipt
from tether.http._console_auth import LoginBody, SignedIn
from tether.http._dependencies import runtime_dependency
from tether.http._errors import ErrorBody, ErrorEnvelope, FieldProblem
from tether.http._input_views import AnswerReceipt, InputItem, InputsPage
from tether.http._insights import AgentItem, AgentsPage, ConversationView, SessionUsage
from tether.http._me import IdentityView
from tether.http._requests import (
    AnswerBody,
    BudgetDecisionBody,
    DecisionBody,
    DispatchBody,
    ForkBody,
    MessageBody,
    RequestBody,
    SessionBody,
)
from tether.http._responses import (
    Aborted,
    Alive,
    ApprovalItem,
    ApprovalsPage,
    DecisionReceipt,
    DependencyItem,
    DispatchAccepted,
    DispatchSettled,
    Forked,
    MessagesPage,
    Ready,
    RecordsPage,
    Settlement,
    SubmissionReceipt,
    Verified,
    WireResponse,
)
from tether.http._schedules import ScheduleBody, ScheduleDeleted, ScheduleItem, SchedulesPage
from tether.http._session_views import ErasedView, MetadataView, SessionItem, SessionsPage
from tether.http._spans import SpansPage, SpanView
from tether.http._submission_views import (
    OpenSubmissions,
    SubmissionTreeNode,
    SubmissionView,
)
from tether.http._usage_views import UsageAnswer
from tether.http._versions import UpgradeBody, UpgradeResult, VersionItem, VersionsPage

__all__ = (
    "Aborted",
    "AgentItem",
    "AgentsPage",
    "Alive",
    "AnswerBody",
    "AnswerReceipt",
    "ApprovalItem",
    "ApprovalsPage",
    "BudgetDecisionBody",
    "BudgetGateItem",
    "BudgetGatesPage",
    "BudgetReceipt",
    "ConversationView",
    "DecisionBody",
    "DecisionReceipt",
    "DependencyItem",
    "DispatchAccepted",
    "DispatchBody",
    "DispatchSettled",
    "ErasedView",
    "ErrorBody",
    "ErrorEnvelope",
    "FieldProblem",
    "ForkBody",
    "Forked",
    "IdentityView",
    "InputItem",
    "InputsPage",
    "LoginBody",
    "MessageBody",
    "MessagesPage",
    "MetadataView",
    "OpenSubmissions",
    "Ready",
    "RecordsPage",
    "RequestBody",
    "ScheduleBody",
    "ScheduleDeleted",
    "ScheduleItem",
    "SchedulesPage",
    "SessionBody",
    "SessionItem",
    "SessionUsage",
    "SessionsPage",
    "Settlement",
    "SignedIn",
    "SpanView",
    "SpansPage",
    "SubmissionReceipt",
    "SubmissionTreeNode",
    "SubmissionView",
    "UpgradeBody",
    "UpgradeResult",
    "UsageAnswer",
    "Verified",
    "VersionItem",
    "VersionsPage",
    "WireResponse",
    "create_app",
    "runtime_dependency",
)
