"""Durable storage: the store contract and its backends (docs/architecture.md §4).

Example::

    from tether.store import open_store

    store = await open_store("sqlite:///./tether-data")
"""

from tether.store._capabilities import (
    CAPABILITIES,
    CapabilityName,
    StoreCapabilities,
    require_capability,
)
from tether.store._export import (
    EXPORT_PAGE,
    EXPORT_VERSION,
    ExportSignature,
    ExportTrailer,
    LogWalk,
    VerifiedExport,
    export_chunks,
    verify_export,
)
from tether.store._export_keys import ExportKey, ExportPublicKey
from tether.store._failpoints import with_failpoints
from tether.store._gates import Gate, GateKind, GateStatus
from tether.store._limits import ClaimSlots, GrantTime, HeldBack, LimitAsk
from tether.store._memory import MemoryStore
from tether.store._memory_items import MEMORY_SCAN, MemoryHit, MemoryItem, Namespace
from tether.store._metadata import (
    METADATA_LIMITS,
    MetadataLimits,
    MetadataValue,
    merge_metadata,
    parse_metadata,
)
from tether.store._priority import (
    DEFAULT_PRIORITY_AGING,
    PRIORITY_MAX,
    PRIORITY_MIN,
    check_priority,
    check_priority_aging,
)
from tether.store._protocol import (
    AdmitAndClaimStore,
    AttachmentStore,
    ChangeFeed,
    ChildStore,
    ForkStore,
    GateStore,
    ImportStore,
    LimitStore,
    LogStore,
    MemoryItemStore,
    OwnerLiveness,
    RetentionStore,
    ScheduleStore,
    SessionListStore,
    SnapshotStore,
    Store,
    SubmissionStore,
    TimerStore,
    TokenStore,
    UsageStore,
    VersionStore,
    WaitStore,
)
from tether.store._sessions import ErasedSession, ScheduleRow, SessionRow, TruncatedLog
from tether.store._sqlite import DEFAULT_FILENAME as SQLITE_FILENAME
from tether.store._sqlite import SqliteStore
from tether.store._tokens import NewToken, TokenRow
from tether.store._types import (
    MAX_SEQ,
    WAIT_FOR_CHILDREN,
    WAIT_FOR_TIMER,
    Admission,
    Attempt,
    ClaimedHead,
    ClaimSettlement,
    Conversation,
    NewSubmission,
    SessionKey,
    Submission,
    SubmissionStatus,
    TaskParent,
)
from tether.store._url import DEFAULT_STORE_URL, open_store
from tether.store._usage import (
    UsageAsk,
    UsageLease,
    UsageLimit,
    UsageRefusal,
    UsageReserved,
    UsageSpent,
)
from tether.store._versions import VersionCount, VersionsServed, WorkerRow, served_version

__all__ = (
    "CAPABILITIES",
    "DEFAULT_PRIORITY_AGING",
    "DEFAULT_STORE_URL",
    "EXPORT_PAGE",
    "EXPORT_VERSION",
    "MAX_SEQ",
    "MEMORY_SCAN",
    "METADATA_LIMITS",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "SQLITE_FILENAME",
    "WAIT_FOR_CHILDREN",
    "WAIT_FOR_TIMER",
    "Admission",
    "AdmitAndClaimStore",
    "AttachmentStore",
    "Attempt",
    "CapabilityName",
    "ChangeFeed",
    "ChildStore",
    "ClaimSettlement",
    "ClaimSlots",
    "ClaimedHead",
    "Conversation",
    "ErasedSession",
    "ExportKey",
    "ExportPublicKey",
    "ExportSignature",
    "ExportTrailer",
    "ForkStore",
    "Gate",
    "GateKind",
    "GateStatus",
    "GateStore",
    "GrantTime",
    "HeldBack",
    "ImportStore",
    "LimitAsk",
    "LimitStore",
    "LogStore",
    "LogWalk",
    "MemoryHit",
    "MemoryItem",
    "MemoryItemStore",
    "MemoryStore",
    "MetadataLimits",
    "MetadataValue",
    "Namespace",
    "NewSubmission",
    "NewToken",
    "OwnerLiveness",
    "RetentionStore",
    "ScheduleRow",
    "ScheduleStore",
    "SessionKey",
    "SessionListStore",
    "SessionRow",
    "SnapshotStore",
    "SqliteStore",
    "Store",
    "StoreCapabilities",
    "Submission",
    "SubmissionStatus",
    "SubmissionStore",
    "TaskParent",
    "TimerStore",
    "TokenRow",
    "TokenStore",
    "TruncatedLog",
    "UsageAsk",
    "UsageLease",
    "UsageLimit",
    "UsageRefusal",
    "UsageReserved",
    "UsageSpent",
    "UsageStore",
    "VerifiedExport",
    "VersionCount",
    "VersionStore",
    "VersionsServed",
    "WaitStore",
    "WorkerRow",
    "check_priority",
    "check_priority_aging",
    "export_chunks",
    "merge_metadata",
    "open_store",
    "parse_metadata",
    "require_capability",
    "served_version",
    "verify_export",
    "with_failpoints",
)
