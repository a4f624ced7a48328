"""Tenants through the runtime (issue 39): what a caller admits is its tenant's, another
tenant's session is not found (nothing admitted, interrupted, steered or aborted), and the
listings of sessions, approvals, inputs and schedules take a ``tenant`` to the store, on
every store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from pydantic import JsonValue

from tether.engine import ManualClock, Runtime, Schedule, ScheduleNotFound
from tether.errors import ConversationNotFound
from tether.messages import args_digest
from tether.records import ApprovalRequested, InputRequested, RecordDraft
from tether.store import Store

from .agents import echo_agent
from .test_schedules import at, fired, move, scheduler

Make = Callable[..., Runtime]
ACME, GLOBEX = "acme", "globex"


async def test_a_dispatch_is_its_tenants_and_another_tenants_session_is_not_found(
    make_runtime: Make, store: Store
) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start(worker=False)  # nothing runs: what is admitted stays queued
    mine = await runtime.dispatch("echo", "i", "hello", session="s", tenant=ACME)
    assert (await store.get_submission(mine.submission_id)).tenant == ACME
    assert (await store.get_conversation(mine.conversation_id)).tenant == ACME
    before = await store.list_submissions()
    for refused in (
        runtime.dispatch("echo", "i", "hi", session="s", tenant=GLOBEX),
        runtime.dispatch("echo", "i", "hi", session="s", tenant=GLOBEX, multitask="interrupt"),
        runtime.dispatch("echo", "i", "hi", session="s", tenant=GLOBEX, multitask="reject"),
        runtime.steer("echo", "i", "hi", session="s", tenant=GLOBEX),
        runtime.follow_up("echo", "i", "hi", session="s", tenant=GLOBEX),
        runtime.abort("echo", "i", session="s", tenant=GLOBEX),
        runtime.compact("echo", "i", session="s", tenant=GLOBEX),
    ):
        with pytest.raises(ConversationNotFound):
            await refused
    assert await store.list_submissions() == before  # nothing admitted, nothing cancelled
    steered = await runtime.steer("echo", "i", "more", session="s", tenant=ACME)
    assert (await store.get_submission(steered.submission_id)).tenant == ACME
    operators = await runtime.dispatch("echo", "i", "op", session="s")  # an operator's
    assert (await store.get_submission(operators.submission_id)).tenant == ACME
    assert await runtime.abort("echo", "i", session="s", tenant=ACME)


async def test_the_sessions_of_a_tenant(make_runtime: Make, store: Store) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start()
    made: dict[str | None, list[str]] = {ACME: [], GLOBEX: [], None: []}
    for n, tenant in enumerate((ACME, GLOBEX, None, ACME, GLOBEX, ACME)):
        receipt = await runtime.dispatch("echo", "i", "hello", session=f"s{n}", tenant=tenant)
        async with asyncio.timeout(30):
            await runtime.wait(receipt.submission_id)
        made[tenant].append(receipt.conversation_id)
    everything = await runtime.sessions()
    assert len(everything.sessions) == 6
    for tenant in (ACME, GLOBEX):
        seen: list[str] = []
        cursor = None
        while True:
            page = await runtime.sessions(tenant=tenant, limit=1, cursor=cursor)
            assert all(info.tenant == tenant for info in page.sessions)
            seen += [info.conversation_id for info in page.sessions]
            if (cursor := page.next_cursor) is None:
                break
        assert sorted(seen) == sorted(made[tenant])
    filtered = await runtime.sessions(tenant=ACME, agent="echo", instance="i")
    assert {info.conversation_id for info in filtered.sessions} == set(made[ACME])


async def test_the_approvals_and_inputs_of_a_tenant(make_runtime: Make, store: Store) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start(worker=False)
    args: dict[str, JsonValue] = {"to": "bob"}
    for tenant in (ACME, GLOBEX):
        receipt = await runtime.dispatch("echo", "i", "hi", session=tenant, tenant=tenant)
        cid = receipt.conversation_id
        approval = ApprovalRequested(
            approval_id=f"{cid}.2",
            call_id="c1",
            tool="mail",
            args=args,
            args_digest=args_digest(args),
        )
        question = InputRequested(
            input_id=f"{cid}.3", call_id="c2", tool="ask", args={}, prompt="?"
        )
        drafts = [RecordDraft(approval, execution_id="e"), RecordDraft(question, execution_id="e")]
        await store.append(cid, drafts, expected_seq=1, fence=0)
    for tenant in (ACME, GLOBEX):
        approvals = await runtime.approvals(tenant=tenant)
        assert [(g.tenant, g.key.session) for g in approvals.gates] == [(tenant, tenant)]
        inputs = await runtime.inputs(tenant=tenant)
        assert [(g.tenant, g.prompt) for g in inputs.gates] == [(tenant, "?")]
    assert len((await runtime.approvals()).gates) == 2
    assert await runtime.approvals(tenant="nobody") == await runtime.inputs(tenant="nobody")
    page = await runtime.sessions(tenant=ACME)
    assert [(s.pending_approvals, s.pending_inputs) for s in page.sessions] == [(1, 1)]


async def test_a_schedule_is_its_tenants_and_fires_as_it(make_runtime: Make, store: Store) -> None:
    clock = ManualClock(datetime(2026, 1, 5, 8, 58, 30, tzinfo=UTC))
    runtime = make_runtime({"echo": echo_agent()}, clock=clock)
    await runtime.start()
    schedule = Schedule("echo", "i", every=60, grace=10, body="tick", session="ticks")
    added = await runtime.add_schedule(schedule, tenant=ACME)
    assert added.tenant == ACME
    assert [info.tenant for info in await runtime.schedules(tenant=ACME)] == [ACME]
    assert await runtime.schedules(tenant=GLOBEX) == []
    with pytest.raises(ScheduleNotFound):  # another tenant's is not found
        await runtime.delete_schedule(schedule.id, tenant=GLOBEX)
    await move(clock, 30, runtime)
    assert await fired(store) == [f"{schedule.id}:{at(8, 59)}"]
    [submission] = await store.list_submissions()
    assert submission.tenant == ACME
    # A window into another tenant's session is refused for good, not retried.
    foreign = Schedule("echo", "i", every=60, grace=10, body="x", session="ticks", id="foreign")
    await runtime.add_schedule(foreign, tenant=GLOBEX)
    await move(clock, 60, runtime)
    await move(clock, 0, runtime)
    assert "foreign:" not in " ".join(await fired(store))
    assert scheduler(runtime)._handled["foreign"][1] is not None
    await runtime.delete_schedule(schedule.id, tenant=ACME)
    assert [info.id for info in await runtime.schedules()] == ["foreign"]


async def test_an_application_maps_its_instances_to_tenants(
    make_runtime: Make, store: Store
) -> None:
    """``RuntimeConfig.tenant_of``: an operator's admission (and a schedule's) takes the
    instance's tenant; another tenant's is refused, writing nothing; an unmapped instance is
    its first admitter's."""
    runtime = make_runtime(
        {"echo": echo_agent()},
        tenant_of=lambda agent, instance: instance.split("-")[0] if "-" in instance else None,
    )
    await runtime.start(worker=False)
    operators = await runtime.dispatch("echo", "acme-desk", "hello")
    assert (await store.get_conversation(operators.conversation_id)).tenant == ACME
    own = await runtime.dispatch("echo", "acme-desk", "again", tenant=ACME)
    assert own.conversation_id == operators.conversation_id
    before = await store.list_submissions()
    with pytest.raises(ConversationNotFound):
        await runtime.dispatch("echo", "acme-desk", "hi", session="new", tenant=GLOBEX)
    assert await store.list_submissions() == before
    unmapped = await runtime.dispatch("echo", "lobby", "hi", tenant=GLOBEX)
    assert (await store.get_conversation(unmapped.conversation_id)).tenant == GLOBEX
