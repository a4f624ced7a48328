"""Priorities (issue 41): a dispatch's ``priority``, an agent's default, a child's inheritance,
aging on the runtime's clock, and an urgent run claimed ahead of a PostgreSQL backlog."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import cast

import pytest

from tether.engine import ManualClock, Runtime, SubmissionClaimed
from tether.errors import InvalidDispatch
from tether.store import NewSubmission, SessionKey, Store
from tether.store.postgres import PostgresStore
from tether.testing.storetest import CompleteStore

from ..postgres import fresh_schema, store_url
from .agents import echo_agent
from .conftest import FAST
from .test_delegation import WAIT, Recorder, define, delegating, researcher

Make = Callable[..., Runtime]


async def test_a_dispatch_takes_its_priority_else_its_agents_else_zero(
    make_runtime: Make, store: Store
) -> None:
    runtime = make_runtime({"plain": echo_agent(), "urgent": echo_agent(priority=5)})
    given = await runtime.dispatch("plain", "a", "hi", priority=-3)
    default = await runtime.dispatch("urgent", "a", "hi")
    overridden = await runtime.dispatch("urgent", "b", "hi", priority=0)
    zero = await runtime.dispatch("plain", "b", "hi")
    priorities = [
        (await store.get_submission(r.submission_id)).priority
        for r in (given, default, overridden, zero)
    ]
    assert priorities == [-3, 5, 0, 0]
    claim_order = [s.id for s in await store.list_runnable()]
    assert claim_order == [
        default.submission_id,
        overridden.submission_id,  # ties in admission order
        zero.submission_id,
        given.submission_id,
    ]


async def test_a_priority_out_of_range_is_refused_with_nothing_admitted(
    make_runtime: Make, store: Store
) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    for bad in (1001, -1001, True, 2.5, "3"):
        with pytest.raises(InvalidDispatch) as refused:
            await runtime.dispatch("echo", "a", "hi", priority=bad)  # type: ignore[arg-type]
        assert refused.value.field == "priority"
    assert await store.list_submissions() == []


def test_an_agents_priority_and_the_aging_are_checked_when_the_runtime_is_built() -> None:
    with pytest.raises(ValueError, match=r"agents\['echo'\]: priority"):
        Runtime({"echo": echo_agent(priority=5000)}, "memory://")
    for aging in (0.0, -1.0, 2 * 86400.0):
        with pytest.raises(ValueError, match="aging"):
            Runtime({"echo": echo_agent()}, "memory://", priority_aging=aging)


async def test_an_old_low_priority_submission_ages_ahead_of_a_stream_of_urgent_ones(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """Urgent work arrives as fast as it is claimed (one every 40 s, each claim takes one):
    without aging the patient submission would wait forever. At +1 priority a minute, the
    priority-5 ones admitted up to five minutes after it go first; the next one after that
    finds it ahead."""
    runtime = make_runtime({"echo": echo_agent()}, priority_aging=60.0)
    old = await runtime.dispatch("echo", "old", "patient", priority=0)
    claimed: list[str] = []
    urgent: list[str] = []
    while old.submission_id not in claimed:
        assert len(claimed) < 20, "the patient submission starved"
        await clock.advance(40)
        urgent.append(
            (await runtime.dispatch("echo", f"u{len(urgent)}", "now", priority=5)).submission_id
        )
        (head,) = await store.claim_runnable(
            attempt_ids=[f"att-{len(claimed)}"],
            owner_id="w",
            lease_expires_at=clock.now() + timedelta(hours=1),
            now=clock.now(),
        )
        claimed.append(head.submission.id)
    # Admitted at 40..280 s, ranked at -260..-20 s: ahead of it (0). At 320 s, at +20 s: behind.
    assert claimed == [*urgent[:7], old.submission_id]


async def test_a_task_inherits_its_parents_priority(make_runtime: Make, store: Store) -> None:
    runtime = make_runtime(
        {
            "assistant": define(delegating({"agent": "researcher", "prompt": "tides"})),
            "researcher": define(researcher(), "answers lookups"),
        },
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "ask", priority=7)
    async with asyncio.timeout(WAIT):
        assert (await runtime.wait(receipt.submission_id))["status"] == "succeeded"
    (child,) = await cast(CompleteStore, store).list_children(receipt.submission_id)
    assert child.priority == 7


@pytest.mark.postgres
async def test_an_urgent_dispatch_is_claimed_ahead_of_a_backlog_of_a_thousand() -> None:
    """A thousand low-priority submissions wait, each the head of its session; an urgent
    one admitted after them is the first the worker claims, and settles."""
    backlog = 1000
    clock = ManualClock()
    async with await PostgresStore.open(store_url(fresh_schema())) as store:
        for n in range(backlog):
            await store.admit(
                NewSubmission(
                    id=f"low-{n:04d}",
                    key=SessionKey("echo", f"i{n}", "default"),
                    conversation_id=f"conv-{n:04d}",
                    input={"kind": "user", "body": f"low {n}"},
                    created_at=clock.now(),
                    priority=-1,
                )
            )
        await clock.advance(600)  # ten minutes later: well past what aging gives one step
        recorder = Recorder()
        runtime = Runtime(
            {"echo": echo_agent()},
            store,
            **{**FAST, "clock": clock, "max_concurrent_runs": 1},
            observers=[recorder],
        )
        # Admitted before the worker starts: its first claim chooses among all of them.
        urgent = await runtime.dispatch("echo", "vip", "urgent", priority=100)
        async with runtime:
            async with asyncio.timeout(WAIT):
                settled = await runtime.wait(urgent.submission_id)
            assert settled == {"status": "succeeded", "result": "echo: urgent"}
        claimed = [e.correlation.submission_id for e in recorder.of(SubmissionClaimed)]
        assert claimed[0] == urgent.submission_id
