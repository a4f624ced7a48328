"""Retention (issue 22, item 3), on every store: idle sessions erased, long logs cut at their
head into a ``log_truncated`` record that keeps them verifiable, resumable and replayable."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest

from tether.engine import ManualClock, PruneAction, Retention, Runtime
from tether.errors import ConversationNotFound, SeqTruncated
from tether.messages import ModelRequest
from tether.models import ScriptedModel
from tether.records import LogTruncated
from tether.store import ErasedSession, Store
from tether.testing import replay_log
from tether.testing.storetest import CompleteStore

from ..journal.harnesses import LoopHarness, planning_model
from .agents import agent, echo_agent, slow_tools
from .test_approvals import gates_agent, pending_gate
from .waits import advance_until, until_appended

WAIT = 30
DAY = timedelta(days=1)


class Asked:
    """A scripted echo model that keeps every request it was sent."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []
        self.model = ScriptedModel(self._answer)

    def _answer(self, request: ModelRequest) -> str:
        self.requests.append(request)
        return "echo: " + request.messages[-1].text


async def _say(runtime: Runtime, body: str, *, session: str = "s", agent_: str = "echo") -> str:
    receipt = await runtime.dispatch(agent_, "acme", body, session=session)
    async with asyncio.timeout(WAIT):
        await runtime.wait(receipt.submission_id)
    return receipt.conversation_id


async def _long_session(runtime: Runtime, turns: int = 12) -> str:
    cid = ""
    for n in range(turns):
        cid = await _say(runtime, f"message {n}")
    return cid


async def test_a_cut_keeps_the_session_verifiable_resumable_and_replayable(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    asked = Asked()
    agents = {"echo": echo_agent(model=asked.model)}
    runtime = make_runtime(agents)
    await runtime.start()
    cid = await _long_session(runtime)
    head = await store.head(cid)
    history = await runtime.messages(cid)
    usage = await runtime.usage(cid)

    report = await runtime.prune(Retention(keep_records=10))
    [outcome] = report.outcomes
    assert outcome.action is PruneAction.TRUNCATE and outcome.skipped is None
    assert outcome.conversation_id == cid and outcome.records == head
    assert outcome.through_seq is not None and head - outcome.through_seq >= 10
    assert outcome.removed == outcome.through_seq and outcome.bytes_after is not None
    assert outcome.bytes_after < outcome.bytes
    [anchor] = await store.read(cid, limit=1)
    assert (anchor.kind, anchor.seq) == (LogTruncated.KIND, outcome.through_seq)
    assert await runtime.verify(cid) == head
    # A fresh runtime (no view kept) reads the same history, usage and session row.
    fresh = make_runtime(agents)
    await fresh.start()
    assert await fresh.messages(cid) == history
    assert await fresh.usage(cid) == usage
    [row] = (await fresh.sessions()).sessions
    assert (row.records, row.bytes) == (head, outcome.bytes_after)
    # The next turn sees the whole history, as it would have without the cut.
    await _say(fresh, "after the cut")
    assert list(asked.requests[-1].messages[:-1]) == history
    assert (await fresh.usage(cid)).calls == usage.calls + 1
    assert await fresh.verify(cid) == await store.head(cid) > head
    # Replay covers the executions that remain, with no model call.
    calls = len(asked.requests)
    records = await fresh.records(cid, limit=10_000)
    replayed = await replay_log(records, agents)
    assert replayed.identical, replayed
    assert 0 < replayed.executions < 13
    assert len(asked.requests) == calls
    # Nothing before the anchor can be forked; from it on, a fork works.
    with pytest.raises(SeqTruncated):
        await fresh.fork(cid, at_seq=1, session="early")
    fork = await fresh.fork(cid, at_seq=anchor.seq + 1, session="late")
    assert await fresh.verify(fork.id) == anchor.seq + 2


async def test_a_dry_run_removes_nothing_and_says_what_would_go(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start()
    cid = await _long_session(runtime)
    before = await runtime.records(cid, limit=10_000)
    dry = await runtime.prune(Retention(keep_records=10), dry_run=True)
    assert dry.dry_run and dry.truncated == 1
    assert await runtime.records(cid, limit=10_000) == before
    done = await runtime.prune(Retention(keep_records=10))
    assert [(o.action, o.through_seq, o.removed) for o in done.outcomes] == [
        (o.action, o.through_seq, o.removed) for o in dry.outcomes
    ]
    # Cut again only once the log grew by a quarter past what it keeps.
    assert (await runtime.prune(Retention(keep_records=10))).outcomes == ()


async def test_a_cut_again_goes_on_from_the_anchor(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    asked = Asked()
    runtime = make_runtime({"echo": echo_agent(model=asked.model)})
    await runtime.start()
    cid = await _long_session(runtime, 6)
    first = await runtime.prune(Retention(keep_records=8))
    assert first.truncated == 1
    for n in range(6):
        await _say(runtime, f"more {n}")
    history = await runtime.messages(cid)
    usage = await runtime.usage(cid)
    second = await runtime.prune(Retention(keep_records=8))
    [outcome] = second.outcomes
    assert outcome.through_seq is not None and first.outcomes[0].through_seq is not None
    assert outcome.through_seq > first.outcomes[0].through_seq
    assert outcome.removed == outcome.through_seq - first.outcomes[0].through_seq + 1
    runtime.views.forget(cid)
    assert await runtime.messages(cid) == history
    assert await runtime.usage(cid) == usage
    assert await runtime.verify(cid) == await store.head(cid)


async def test_a_cut_never_splits_a_submission_in_flight(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    """The records of a run still going stay whole: the cut falls before its first one, and
    a log that is one long run has no cut point at all."""
    release = asyncio.Event()
    runtime = make_runtime(
        {
            "echo": echo_agent(),
            "slow": agent(LoopHarness(), planning_model(), slow_tools(WAIT, release=release)),
        }
    )
    await runtime.start()
    cid = await _long_session(runtime, 6)
    slow = await runtime.dispatch("slow", "acme", "use the tool", session="busy")

    async def tool_running() -> bool:
        return await store.head(slow.conversation_id) >= 5

    await until_appended(store, slow.conversation_id, tool_running)
    report = await runtime.prune(Retention(keep_records=1))
    outcomes = {o.conversation_id: o for o in report.outcomes}
    assert outcomes[slow.conversation_id].skipped == "no cut point"
    assert outcomes[cid].skipped is None
    release.set()
    async with asyncio.timeout(WAIT):
        await runtime.wait(slow.submission_id)


async def test_idle_sessions_are_erased_but_never_work_in_flight(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    """A session waiting weeks for an approval is kept, however idle; an agent's own policy
    replaces the runtime's."""
    clock = ManualClock()
    runtime = make_runtime(
        {"echo": echo_agent(), "audit": echo_agent(), "gated": gates_agent()}, clock=clock
    )
    await runtime.start()
    idle = await _say(runtime, "old news", session="idle")
    kept = await _say(runtime, "keep me", agent_="audit")
    parked = await runtime.dispatch("gated", "acme", "mail bob", session="waiting")
    approval = await pending_gate(runtime, store, parked)
    policy = Retention(erase_after_idle=30 * DAY, agents={"audit": Retention()})
    assert (await runtime.prune(policy)).outcomes == ()  # nothing is idle yet
    await clock.advance((31 * DAY).total_seconds())
    dry = await runtime.prune(policy, dry_run=True)
    assert {(o.conversation_id, o.skipped) for o in dry.outcomes} == {
        (idle, None),
        (parked.conversation_id, "busy"),
    }
    report = await runtime.prune(policy)
    assert {(o.conversation_id, o.action, o.skipped) for o in report.outcomes} == {
        (idle, PruneAction.ERASE, None),
        (parked.conversation_id, PruneAction.ERASE, "busy"),
    }
    assert report.erased == 1 and report.scanned == 3
    with pytest.raises(ConversationNotFound):
        await store.get_conversation(idle)
    await store.get_conversation(kept)
    await runtime.approve(approval, "approve", approver="ann")
    async with asyncio.timeout(WAIT):
        await runtime.wait(parked.submission_id)


async def test_a_worker_prunes_in_the_background(
    make_runtime: Callable[..., Runtime], store: CompleteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock()
    erased = asyncio.Event()
    erase_session = store.erase_session

    async def erasing(conversation_id: str) -> ErasedSession:
        session = await erase_session(conversation_id)
        erased.set()  # an erasure emits no event and appends nothing: heard here
        return session

    monkeypatch.setattr(store, "erase_session", erasing)
    runtime = make_runtime(
        {"echo": echo_agent()},
        clock=clock,
        retention=Retention(erase_after_idle=7 * DAY, every=timedelta(hours=1)),
    )
    await runtime.start()
    cid = await _say(runtime, "soon gone", session="old")
    await clock.advance((8 * DAY).total_seconds())
    await advance_until(clock, erased.wait(), step=3600)
    with pytest.raises(ConversationNotFound):
        await store.get_conversation(cid)


def test_a_policy_is_checked_when_made() -> None:
    with pytest.raises(ValueError, match="erase_after_idle"):
        Retention(erase_after_idle=timedelta(0))
    with pytest.raises(ValueError, match="keep_records"):
        Retention(keep_records=0)
    with pytest.raises(ValueError, match="every"):
        Retention(every=timedelta(0))
    audit = Retention()
    policy = Retention(keep_records=5, agents={"audit": audit})
    assert policy.of("audit") is audit and policy.of("other") is policy
    assert policy.prunes and not audit.prunes
