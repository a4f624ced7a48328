"""A third party's store as it would start: only the core of the contract
(``tether.store.Store``), here a thin wrapper that hands each core method to an in-memory
store and offers nothing else."""

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from tether.records import Record, RecordDraft
from tether.store import (
    Admission,
    Attempt,
    ClaimedHead,
    ClaimSettlement,
    Conversation,
    MemoryStore,
    NewSubmission,
    SessionKey,
    Submission,
    SubmissionStatus,
)


class CoreOnlyStore:
    """Every method of ``Store``, and not one more."""

    url = "core-only://"

    def __init__(self) -> None:
        self._inner = MemoryStore()

    # --- the log ----------------------------------------------------------------------

    async def ensure_conversation(
        self, key: SessionKey, *, conversation_id: str, created_at: datetime
    ) -> tuple[Conversation, bool]:
        return await self._inner.ensure_conversation(
            key, conversation_id=conversation_id, created_at=created_at
        )

    async def get_conversation(self, conversation_id: str) -> Conversation:
        return await self._inner.get_conversation(conversation_id)

    async def find_conversation(self, key: SessionKey) -> Conversation:
        return await self._inner.find_conversation(key)

    async def append(
        self, conversation_id: str, drafts: Sequence[RecordDraft], *, expected_seq: int, fence: int
    ) -> list[Record]:
        return await self._inner.append(
            conversation_id, drafts, expected_seq=expected_seq, fence=fence
        )

    async def read(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> list[Record]:
        return await self._inner.read(conversation_id, after_seq=after_seq, limit=limit)

    async def head(self, conversation_id: str) -> int:
        return await self._inner.head(conversation_id)

    async def mint_fence(self, conversation_id: str) -> int:
        return await self._inner.mint_fence(conversation_id)

    async def verify(self, conversation_id: str) -> int:
        return await self._inner.verify(conversation_id)

    async def wait_for_append(self, conversation_id: str, *, after_seq: int) -> int:
        return await self._inner.wait_for_append(conversation_id, after_seq=after_seq)

    # --- admission, claims and settlement ---------------------------------------------

    async def admit(self, new: NewSubmission) -> Admission:
        return await self._inner.admit(new)

    async def get_submission(self, submission_id: str) -> Submission:
        return await self._inner.get_submission(submission_id)

    async def list_submissions(
        self,
        status: SubmissionStatus | None = None,
        *,
        conversation_id: str | None = None,
        unsettled: bool = False,
        tenant: str | None = None,
    ) -> list[Submission]:
        return await self._inner.list_submissions(
            status, conversation_id=conversation_id, unsettled=unsettled, tenant=tenant
        )

    async def list_runnable(self, limit: int = 100) -> list[Submission]:
        return await self._inner.list_runnable(limit)

    async def claim(self, submission_id: str, **claim: Any) -> Submission:
        return await self._inner.claim(submission_id, **claim)

    async def claim_runnable(self, **claim: Any) -> list[ClaimedHead]:
        return await self._inner.claim_runnable(**claim)

    async def list_attempts(self, submission_id: str) -> list[Attempt]:
        return await self._inner.list_attempts(submission_id)

    async def renew_lease(
        self, submission_id: str, *, attempt_id: str, lease_expires_at: datetime
    ) -> Submission:
        return await self._inner.renew_lease(
            submission_id, attempt_id=attempt_id, lease_expires_at=lease_expires_at
        )

    async def list_expired_leases(self, now: datetime) -> list[Submission]:
        return await self._inner.list_expired_leases(now)

    async def release(self, submission_id: str, **release: Any) -> Submission:
        return await self._inner.release(submission_id, **release)

    async def request_cancel(self, submission_id: str, **cancel: Any) -> Submission:
        return await self._inner.request_cancel(submission_id, **cancel)

    async def reserve_settlement(self, submission_id: str, **reserve: Any) -> Submission:
        return await self._inner.reserve_settlement(submission_id, **reserve)

    async def settle_absorbed(self, submission_id: str, **settle: Any) -> Submission:
        return await self._inner.settle_absorbed(submission_id, **settle)

    async def finalize_settlement(self, submission_id: str, *, now: datetime) -> Submission:
        return await self._inner.finalize_settlement(submission_id, now=now)

    async def append_settled(
        self,
        conversation_id: str,
        drafts: Sequence[RecordDraft],
        *,
        expected_seq: int,
        fence: int,
        settle: ClaimSettlement,
    ) -> list[Record]:
        return await self._inner.append_settled(
            conversation_id, drafts, expected_seq=expected_seq, fence=fence, settle=settle
        )

    # --- lifecycle --------------------------------------------------------------------

    async def ping(self) -> None:
        await self._inner.ping()

    async def close(self) -> None:
        await self._inner.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
