"""Sessions an operator can list and erase (issue 22, items 1 and 2), on every store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest

from tether.engine import Budget, Limits, ManualClock, Runtime, SessionPage, SessionState
from tether.errors import (
    ConversationNotFound,
    InvalidMetadata,
    SessionBusy,
    SubmissionNotFound,
)
from tether.messages import ModelRequest
from tether.models import ScriptedModel
from tether.store import Store, SubmissionStatus

from ..journal.harnesses import EchoHarness, LoopHarness, planning_model
from .agents import agent, echo_agent, slow_tools
from .test_budget import define, looping
from .test_limits import Held, _turns
from .waits import advance_until, until_appended, until_emitted

WAIT = 30


async def _settle(runtime: Runtime, session: str, body: str = "hello", agent_: str = "echo") -> str:
    receipt = await runtime.dispatch(agent_, "acme", body, session=session)
    async with asyncio.timeout(WAIT):
        await runtime.wait(receipt.submission_id)
    return receipt.conversation_id


async def test_sessions_newest_activity_first_with_their_state(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    runtime = make_runtime({"echo": echo_agent(), "other": echo_agent()})
    await runtime.start()
    first = await _settle(runtime, "s1")
    second = await _settle(runtime, "s2")
    await _settle(runtime, "o1", agent_="other")
    await _settle(runtime, "s1", body="again")  # s1 is now the newest of echo's
    page = await runtime.sessions(agent="echo")
    assert [s.conversation_id for s in page.sessions] == [first, second]
    assert page.next_cursor is None
    newest = page.sessions[0]
    assert newest.status is SessionState.IDLE and newest.pending_approvals == 0
    assert newest.records > page.sessions[1].records and newest.bytes > 0
    assert newest.last_activity_at >= page.sessions[1].last_activity_at
    assert newest.usage is None
    with_usage = await runtime.sessions(agent="echo", instance="acme", usage=True)
    assert [s.usage.calls if s.usage else None for s in with_usage.sessions] == [2, 1]
    everything = await runtime.sessions()
    assert len(everything.sessions) == 3


async def test_paging_goes_through_every_session_once(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start()
    made = [await _settle(runtime, f"s{i}") for i in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        page = await runtime.sessions(limit=2, cursor=cursor)
        assert len(page.sessions) <= 2
        seen += [s.conversation_id for s in page.sessions]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == list(reversed(made))


async def test_a_status_filter(make_runtime: Callable[..., Runtime], store: Store) -> None:
    release = asyncio.Event()
    runtime = make_runtime(
        {
            "echo": echo_agent(),
            "slow": agent(LoopHarness(), planning_model(), slow_tools(WAIT, release=release)),
            "broken": echo_agent(max_attempts=1, model=_broken()),
        }
    )
    await runtime.start()
    await _settle(runtime, "idle")
    await _settle(runtime, "bad", agent_="broken")
    receipt = await runtime.dispatch("slow", "acme", "lookup", session="busy")
    try:

        async def running_sessions() -> SessionPage | None:
            page = await runtime.sessions(status=SessionState.RUNNING)
            return page if page.sessions else None

        running = await until_appended(store, receipt.conversation_id, running_sessions)
        assert [s.key.session for s in running.sessions] == ["busy"]
        failed = await runtime.sessions(status=SessionState.FAILED)
        assert [s.key.session for s in failed.sessions] == ["bad"]
        idle = await runtime.sessions(status=SessionState.IDLE)
        assert [s.key.session for s in idle.sessions] == ["idle"]
    finally:
        release.set()
        async with asyncio.timeout(WAIT):
            await runtime.wait(receipt.submission_id)


def _broken() -> ScriptedModel:
    def fail(request: ModelRequest) -> object:
        raise RuntimeError("no")

    return ScriptedModel(fail)


async def test_bad_pages_are_refused(make_runtime: Callable[..., Runtime], store: Store) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start()
    with pytest.raises(ValueError):
        await runtime.sessions(limit=0)
    with pytest.raises(ValueError):
        await runtime.sessions(instance="acme")


async def test_erase_removes_the_session_and_a_busy_one_needs_force(
    make_runtime: Callable[..., Runtime], store: Store, clock: ManualClock
) -> None:
    release = asyncio.Event()
    runtime = make_runtime(
        {
            "echo": echo_agent(),
            "slow": agent(LoopHarness(), planning_model(), slow_tools(WAIT, release=release)),
        }
    )
    await runtime.start()
    conversation = await _settle(runtime, "gone")
    [submission] = await store.list_submissions(conversation_id=conversation)
    erased = await runtime.erase_session("echo", "acme", session="gone")
    assert (erased.conversation_id, erased.submissions) == (conversation, 1)
    assert erased.records >= 5
    with pytest.raises(ConversationNotFound):
        await store.read(conversation)
    with pytest.raises(SubmissionNotFound):
        await store.get_submission(submission.id)
    with pytest.raises(ConversationNotFound):
        await runtime.erase_session("echo", "acme", session="gone")
    again = await _settle(runtime, "gone")  # the key is free: a fresh conversation
    assert again != conversation

    receipt = await runtime.dispatch("slow", "acme", "lookup", session="busy")

    async def running() -> bool:
        return (await store.get_submission(receipt.submission_id)).status.value == "running"

    await until_appended(store, receipt.conversation_id, running)
    with pytest.raises(SessionBusy):
        await runtime.erase_session("slow", "acme", session="busy")
    # A forced erase looks on the clock for what it aborted to settle.
    erasing = runtime.erase_session("slow", "acme", session="busy", force=True)
    forced = await advance_until(clock, erasing, step=0.05)
    assert forced.submissions == 1
    assert all(s.key.session != "busy" for s in (await runtime.sessions()).sessions)


async def test_a_session_says_what_it_waits_for(
    make_runtime: Callable[..., Runtime], store: Store, clock: ManualClock
) -> None:
    """A run held back by a limit, a delayed dispatch at a session's head and a run parked
    on its budget each show as ``waiting``, with its own reason (a run held back by a limit
    was ``running`` before: issue 41, "queued-for-limit as its own waiting reason")."""
    model = Held(clock)
    runtime = make_runtime(
        {
            "a": agent(EchoHarness(), model, limits=Limits(concurrency=1)),
            "b": define(looping(), budget=Budget(model_calls=1, on_exhausted="park")),
        }
    )
    await runtime.start()
    first = await runtime.dispatch("a", "acme", "go", session="first")
    held = await runtime.dispatch("a", "acme", "go", session="held")
    await asyncio.wait_for(model.entered.wait(), WAIT)
    await _turns(clock)
    later = await runtime.dispatch("a", "acme", "go", session="later", after=3600)
    parked = await runtime.dispatch("b", "acme", "go")

    async def on_its_gate() -> bool:
        return (await store.get_submission(parked.submission_id)).status is SubmissionStatus.WAITING

    await until_emitted(runtime, on_its_gate)
    sessions = {s.conversation_id: s for s in (await runtime.sessions()).sessions}
    receipts = {"first": first, "held": held, "later": later, "parked": parked}
    standing = {
        name: (info.status, info.wait_reason, info.held_by)
        for name, receipt in receipts.items()
        for info in [sessions[receipt.conversation_id]]
    }
    # Which of the two takes the one slot is the claims' to decide (one may be claimed at
    # its admission while the other waits for the claim loop): one runs, the other waits.
    assert {standing.pop("first"), standing.pop("held")} == {
        (SessionState.RUNNING, None, None),
        (SessionState.WAITING, "limit", "agent"),
    }
    assert standing == {
        "later": (SessionState.WAITING, "scheduled", None),
        "parked": (SessionState.WAITING, "budget", None),
    }
    assert sessions[later.conversation_id].due_at == clock.now() + timedelta(hours=1)
    waiting = await runtime.sessions(status=SessionState.WAITING)
    assert {s.wait_reason for s in waiting.sessions} == {"limit", "scheduled", "budget"}
    model.release.set()
    async with asyncio.timeout(WAIT):
        for receipt in (first, held):
            await runtime.wait(receipt.submission_id)


async def test_a_dispatchs_metadata_merges_before_it_is_admitted(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    """Issue 43, item 5: a new session starts with its first dispatch's metadata, a later one
    merges into it, and a merge out of bounds admits nothing; another tenant's session is
    not patched (the admission refuses it)."""
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start()
    first = await runtime.dispatch("echo", "acme", "hi", session="m", metadata={"a": 1})
    again = await runtime.dispatch(
        "echo", "acme", "refund please", session="m", metadata={"a": None, "b": "x"}
    )
    assert again.conversation_id == first.conversation_id
    async with asyncio.timeout(WAIT):
        await runtime.wait(again.submission_id)
    [listed] = (await runtime.sessions(text="REFUND")).sessions
    assert listed.metadata == {"b": "x"}
    assert (await runtime.sessions(metadata={"b": "x"}, text="nothing")).sessions == ()
    head = (await runtime.sessions()).sessions[0].records
    too_many = {f"k{n}": n for n in range(64)}  # 65 with "b"
    with pytest.raises(InvalidMetadata):
        await runtime.dispatch("echo", "acme", "more", session="m", metadata=too_many)
    assert (await runtime.sessions()).sessions[0].records == head  # nothing admitted
    with pytest.raises(InvalidMetadata):
        await runtime.dispatch("echo", "acme", "x", session="new", metadata={"n": [1]})
    assert len((await runtime.sessions()).sessions) == 1
    assert await runtime.patch_session_metadata("echo", "acme", {"c": True}, session="m") == {
        "b": "x",
        "c": True,
    }
    with pytest.raises(ConversationNotFound):
        await runtime.patch_session_metadata("echo", "acme", {"c": 1}, session="m", tenant="t")
    with pytest.raises(ConversationNotFound):
        await runtime.patch_session_metadata("echo", "acme", {"c": 1}, session="absent")
    with pytest.raises(ConversationNotFound):
        await runtime.dispatch("echo", "acme", "x", session="m", tenant="t", metadata={"d": 1})
    assert (await runtime.sessions()).sessions[0].metadata == {"b": "x", "c": True}
