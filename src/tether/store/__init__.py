"""Durable storage: the store contract and its backends (docs/architecture.md §4).

Example::

    from tether.store import open_store

    store = await open_store("sqlite:///./tether-data")
"""

from tether.store._capabilities import StoreCapabilities
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
from tether.store._gates import Gate, GateKind, GateStatus
from tether.store._memory import MemoryStore
from tether.store._protocol import (
    AttachmentStore,
    ChangeFeed,
    LogStore,
    OwnerLiveness,
    Store,
    SubmissionStore,
)
from tether.store._sessions import ErasedSession, ScheduleRow, SessionRow, TruncatedLog
from tether.store._sqlite import DEFAULT_FILENAME as SQLITE_FILENAME
from tether.store._sqlite import SqliteStore
from tether.store._types import (
    MAX_SEQ,
    WAIT_FOR_CHILDREN,
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

__all__ = (
    "DEFAULT_STORE_URL",
    "EXPORT_PAGE",
    "EXPORT_VERSION",
    "MAX_SEQ",
    "SQLITE_FILENAME",
    "WAIT_FOR_CHILDREN",
    "Admission",
    "AttachmentStore",
    "Attempt",
    "ChangeFeed",
    "ClaimSettlement",
    "ClaimedHead",
    "Conversation",
    "ErasedSession",
    "ExportKey",
    "ExportPublicKey",
    "ExportSignature",
    "ExportTrailer",
    "Gate",
    "GateKind",
    "GateStatus",
    "LogStore",
    "LogWalk",
    "MemoryStore",
    "NewSubmission",
    "OwnerLiveness",
    "ScheduleRow",
    "SessionKey",
    "SessionRow",
    "SqliteStore",
    "Store",
    "StoreCapabilities",
    "Submission",
    "SubmissionStatus",
    "SubmissionStore",
    "TaskParent",
    "TruncatedLog",
    "VerifiedExport",
    "export_chunks",
    "open_store",
    "verify_export",
)
