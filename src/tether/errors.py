"""Typed errors raised by Tether.

Every failure a caller can act on has its own class. Each class carries a stable
``code`` (used as the ``type`` of the HTTP error envelope) and keeps the details a
caller needs as attributes, so nothing has to be parsed out of a message.

Example::

    from tether.errors import Conflict

    try:
        await store.append(conversation_id, drafts, expected_seq=head, fence=fence)
    except Conflict as exc:
        head = exc.actual_seq  # someone else appended first: re-read and retry
"""

from __future__ import annotations

__all__ = (
    "AttachmentNotFound",
    "CanonicalizationError",
    "ClaimLost",
    "Conflict",
    "ConversationNotFound",
    "DispatchConflict",
    "Fenced",
    "LogTampered",
    "NotFound",
    "RecordDecodeError",
    "SeqOutOfRange",
    "SessionExists",
    "StoreError",
    "StoreUnavailable",
    "SubmissionNotFound",
    "TetherError",
    "UnsupportedSchema",
)


class TetherError(Exception):
    """Base class of every error Tether raises on purpose."""

    code: str = "tether_error"


# --- encoding -------------------------------------------------------------------------


class CanonicalizationError(TetherError, ValueError):
    """A value cannot be written as RFC 8785 canonical JSON (NaN, infinity, a non-JSON type)."""

    code = "invalid_json_value"


class RecordDecodeError(TetherError, ValueError):
    """A record (or its payload) does not match its schema.

    ``field`` is the dotted path of the first offending field, e.g. ``payload.callId``.
    """

    code = "invalid_record"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


# --- stores ---------------------------------------------------------------------------


class StoreError(TetherError):
    """Base class of the errors a store raises; no backend exception escapes a store."""

    code = "store_error"


class StoreUnavailable(StoreError):
    """The backend failed (I/O error, lock timeout, closed store). Retrying may succeed."""

    code = "store_unavailable"


class UnsupportedSchema(StoreError):
    """The database was written by a newer Tether whose schema this version cannot read."""

    code = "unsupported_schema"

    def __init__(self, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"database schema version {found} is newer than the supported version {supported}; "
            "upgrade tether to open it"
        )


class Conflict(StoreError):
    """An append's ``expected_seq`` is not the conversation's head: another writer went first."""

    code = "conflict"

    def __init__(self, conversation_id: str, expected_seq: int, actual_seq: int) -> None:
        self.conversation_id = conversation_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq
        super().__init__(
            f"conversation {conversation_id}: expected head {expected_seq}, found {actual_seq}"
        )


class Fenced(StoreError):
    """An append carries a fence lower than the conversation's: its writer was superseded."""

    code = "fenced"

    def __init__(self, conversation_id: str, fence: int, current_fence: int) -> None:
        self.conversation_id = conversation_id
        self.fence = fence
        self.current_fence = current_fence
        super().__init__(
            f"conversation {conversation_id}: fence {fence} is below the current fence "
            f"{current_fence}; this writer was superseded"
        )


class ClaimLost(StoreError):
    """A submission is not in the state (or not owned by the attempt) the operation requires."""

    code = "claim_lost"

    def __init__(self, submission_id: str, reason: str) -> None:
        self.submission_id = submission_id
        self.reason = reason
        super().__init__(f"submission {submission_id}: {reason}")


class DispatchConflict(StoreError):
    """A dispatch id was reused within one session key with a different payload."""

    code = "dispatch_conflict"

    def __init__(self, dispatch_id: str, session_key: str) -> None:
        self.dispatch_id = dispatch_id
        self.session_key = session_key
        super().__init__(
            f"dispatch id {dispatch_id!r} was already used in {session_key} "
            "with a different payload"
        )


class SeqOutOfRange(StoreError, ValueError):
    """A sequence number lies outside the conversation's log (for example a fork past the head)."""

    code = "seq_out_of_range"

    def __init__(self, conversation_id: str, seq: int, head: int) -> None:
        self.conversation_id = conversation_id
        self.seq = seq
        self.head = head
        super().__init__(f"conversation {conversation_id}: seq {seq} is outside 1..{head}")


class SessionExists(StoreError):
    """A new conversation was asked for a session key that already has one (e.g. a fork target)."""

    code = "session_exists"

    def __init__(self, session_key: str) -> None:
        self.session_key = session_key
        super().__init__(f"session {session_key} already has a conversation")


class LogTampered(StoreError):
    """Verification re-derived a hash that differs from the stored chain at ``seq``."""

    code = "log_tampered"

    def __init__(self, conversation_id: str, seq: int, reason: str) -> None:
        self.conversation_id = conversation_id
        self.seq = seq
        self.reason = reason
        super().__init__(f"conversation {conversation_id}: chain broken at seq {seq}: {reason}")


class NotFound(StoreError, LookupError):
    """Base class of the unknown-id errors."""

    code = "not_found"


class SubmissionNotFound(NotFound):
    """No submission has this id."""

    code = "submission_not_found"

    def __init__(self, submission_id: str) -> None:
        self.submission_id = submission_id
        super().__init__(f"submission {submission_id} not found")


class ConversationNotFound(NotFound):
    """No conversation has this id (or session key)."""

    code = "conversation_not_found"

    def __init__(self, conversation: str) -> None:
        self.conversation = conversation
        super().__init__(f"conversation {conversation} not found")


class AttachmentNotFound(NotFound):
    """No attachment is stored under this digest."""

    code = "attachment_not_found"

    def __init__(self, digest: str) -> None:
        self.digest = digest
        super().__init__(f"attachment {digest} not found")
