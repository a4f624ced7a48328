"""Another worker taking over a claim of this process's, in the tests: this process's own
coordinator is kept from claiming or reclaiming meanwhile, so that the takeover is the
test's alone (on a loaded machine, its claim loop would otherwise win the race for the
released claim)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tether.engine import ManualClock
from tether.store import Store, Submission

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
