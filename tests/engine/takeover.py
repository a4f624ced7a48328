"""Claims in the tests: one this process's coordinator is made to take now, and another
worker taking over a claim of this process's. Its claim loop runs meanwhile: a claim pass
of the test's may find the head locked by the loop's own pass (PostgreSQL skips it), and
during a takeover the loop is kept from claiming or reclaiming, so that the takeover is the
test's alone (on a loaded machine, it would otherwise win the race for the released claim)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tether.engine import ManualClock, Runtime
from tether.store import Store, Submission, SubmissionStatus

from .waits import WAIT

ANOTHER_WORKER = "another-worker"


@contextlib.contextmanager
def claims_held_still(store: Store) -> Iterator[None]:
    """While inside, this process's coordinator claims nothing and releases no expired
    lease (it sees none): as if frozen, for its claims."""

    async def nothing(*args: Any, **kwargs: Any) -> list[Submission]:
        return []

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "claim_runnable", nothing)
        patch.setattr(store, "list_expired_leases", nothing)
        yield


async def take_over(store: Store, clock: ManualClock, held: Submission) -> Submission:
    """Release ``held``'s claim, its lease run out, and claim it as another worker."""
    await store.release(held.id, attempt_id=str(held.attempt_id))
    return await store.claim(
        held.id,
        attempt_id="attempt-of-another-worker",
        owner_id=ANOTHER_WORKER,
        lease_expires_at=clock.now() + timedelta(hours=1),
        now=clock.now(),
    )


async def claimed_here(runtime: Runtime, store: Store, submission_id: str) -> Submission:
    """Run claim passes until ``submission_id`` is claimed (by this process: no other
    claims), and answer it as claimed."""
    coordinator = runtime._coordinator
    assert coordinator is not None  # a started worker's
    async with asyncio.timeout(WAIT):
        while (held := await store.get_submission(submission_id)).status is not (
            SubmissionStatus.RUNNING
        ):
            await coordinator.claim_runnable()
    return held
