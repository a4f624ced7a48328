"""Two-phase settlement: reserve the exact payload, append the settled record once, finalize."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic import JsonValue

from tether._wire import JsonObject
from tether.engine._clock import Clock
from tether.errors import ClaimLost, Conflict
from tether.journal import NOT_MINTED, Journal, LogView, loose_ends
from tether.records import Record, RecordDraft, SettlementStatus, SubmissionSettled
from tether.store import Store, Submission

__all__ = (
    "ABORTED",
    "ATTEMPT_BUDGET_EXHAUSTED",
    "CANCELLED_BY_PARENT",
    "RESULT_SCHEMA_INVALID",
    "RUN_FAILED",
    "SETTLEMENT_INDETERMINATE",
    "TIMEOUT_EXCEEDED",
    "complete",
    "delivered_to",
    "failed",
    "finish_reserved",
    "settle",
    "settled_record",
    "succeeded",
)

RUN_FAILED: Final = "run_failed"
ATTEMPT_BUDGET_EXHAUSTED: Final = "attempt_budget_exhausted"
TIMEOUT_EXCEEDED: Final = "timeout_exceeded"
SETTLEMENT_INDETERMINATE: Final = "settlement_indeterminate"
RESULT_SCHEMA_INVALID: Final = "result_schema_invalid"
ABORTED: Final = "aborted"
CANCELLED_BY_PARENT: Final = "cancelled_by_parent"


def failed(code: str, error: str, details: JsonObject | None = None) -> SubmissionSettled:
    status = (
        SettlementStatus.ABORTED
        if code in (ABORTED, CANCELLED_BY_PARENT)
        else SettlementStatus.FAILED
    )
    return SubmissionSettled(status=status, error=error, error_code=code, error_details=details)


def succeeded(result: JsonValue) -> SubmissionSettled:
    return SubmissionSettled(status=SettlementStatus.SUCCEEDED, result=result)


def delivered_to(host_id: str) -> SubmissionSettled:
    """How a steer or follow-up settles once a run took it in: delivered to the submission
    ``host_id``, whose run read it (it settles with that run, or at once if it already had)."""
    return succeeded({"deliveredTo": host_id})


async def settled_record(journal: Journal, submission_id: str) -> Record | None:
    """This submission's ``submission_settled`` record, if the log has one."""
    view = await journal.refresh()
    mine = view.executions.by_submission.get(submission_id)
    floor = mine[0].start_index if mine else 0  # nothing before its first execution settles it
    for record in reversed(view.records[floor:]):
        if record.kind == SubmissionSettled.KIND and record.submission_id == submission_id:
            return record
    return None


def _closing(
    view: LogView, submission: Submission, payload: SubmissionSettled
) -> list[RecordDraft]:
    """What closes the execution a settling submission leaves unfinished (it settles while
    a tool runs or a model streams, parked on an approval, an input or its children: aborted,
    timed out, failed, out of attempts): a result for every tool call without one and an
    interrupted completion for a message cut mid-stream (see :func:`loose_ends`). So the log
    reads every gate as closed (it can no longer be decided, and blocks nothing), and the
    session's next execution hands its model a history a provider accepts."""
    mine = view.executions.by_submission.get(submission.id)
    if not mine or mine[-1].completed:
        return []
    pending = mine[-1]
    why = payload.error or payload.status.value
    return [
        RecordDraft(
            closing,
            submission_id=submission.id,
            attempt_id=submission.attempt_id,
            execution_id=pending.id,
        )
        for closing in loose_ends(view.records, pending, why)
    ]


async def _append_once(
    journal: Journal, submission: Submission, payload: SubmissionSettled
) -> Record:
    for _ in range(5):
        existing = await settled_record(journal, submission.id)
        if existing is not None:
            return existing
        if journal.log.fence is NOT_MINTED:
            # Only now that a record must be written: a finisher that finds the work already
            # done must not supersede whatever runs in the conversation since.
            journal.log.fence = await journal.store.mint_fence(journal.conversation.id)
        draft = RecordDraft(payload, submission_id=submission.id, attempt_id=submission.attempt_id)
        try:
            *_, record = await journal.log.append(
                [*_closing(journal.view, submission, payload), draft]
            )
            return record
        except Conflict:
            continue  # someone appended meanwhile: look again, then retry at the new head
    raise Conflict(journal.conversation.id, journal.head, journal.head)


async def settle(
    store: Store,
    submission: Submission,
    payload: SubmissionSettled,
    *,
    clock: Clock,
    fence: int | None = None,
    absorbed: Sequence[Submission] = (),
    view: LogView | None = None,
) -> bool:
    """Settle a running submission exactly once. ``fence=None`` mints a fresh fence, which
    supersedes the attempt's own (use it when a run may still be unwinding). ``absorbed``
    steer submissions that were delivered into the run settle with it.

    Returns false if the attempt no longer owns the submission (nothing is written then).
    """
    assert submission.attempt_id is not None
    try:
        await store.reserve_settlement(
            submission.id, attempt_id=submission.attempt_id, settlement=payload.to_json_object()
        )
    except ClaimLost:
        return False
    await finish_reserved(
        store, submission, payload, clock=clock, fence=fence, absorbed=absorbed, view=view
    )
    return True


async def finish_reserved(
    store: Store,
    submission: Submission,
    payload: SubmissionSettled,
    *,
    clock: Clock,
    fence: int | None = None,
    absorbed: Sequence[Submission] = (),
    view: LogView | None = None,
) -> None:
    """Phase two: append the settled record once (idempotent), then finalize.

    Absorbed steers settle in between, while the session's head is still this submission,
    so no other attempt can be running in the conversation.
    """
    journal = await Journal.open(
        store, submission.conversation_id, fence=NOT_MINTED if fence is None else fence, view=view
    )
    await _append_once(journal, submission, payload)
    for steer in absorbed:
        await _append_once(journal, steer, delivered_to(submission.id))
    await complete(store, submission, absorbed, clock=clock)


async def complete(
    store: Store, submission: Submission, absorbed: Sequence[Submission] = (), *, clock: Clock
) -> None:
    """The bookkeeping once the settled records are durable: absorbed steers, then finalize."""
    joined = delivered_to(submission.id).to_json_object()
    for steer in absorbed:
        await store.settle_absorbed(steer.id, settlement=joined, now=clock.now())
    await store.finalize_settlement(submission.id, now=clock.now())
