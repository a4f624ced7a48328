"""The deploy gate's check of a log (``Journal.check``): completed executions replayed, the
pending one served its recorded prefix, the first divergence returned, never raised; no
model call, no tool call, nothing written (issue 38 item 4)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from pydantic import JsonValue

from tether.errors import ApprovalParked, ReplayDiverged
from tether.journal import NOT_MINTED, Journal, ReplayCheck, Stamp, Turn
from tether.records import SettlementStatus, SubmissionSettled
from tether.store import LogStore, Store
from tether.testing import CountingModel, RecordingTools

from .harnesses import journal, new_conversation, planning_model, user
from .test_resume import cut_after
from .test_versions import DONE, EMAIL, Assistant, park, park_and_approve, versioning

WRITES = frozenset(
    {"append", "append_settled", "append_decision", "mint_fence", "put_snapshot", "park"}
)


class WatchedStore:
    """A store that counts the writes made through it (an append, a fence minted, ...)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.writes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in WRITES:
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.writes.append(name)
            return method(*args, **kwargs)

        return counted


async def check(store: Store, cid: str, harness: Any, version: str = "v1") -> ReplayCheck:
    """Check the log against ``harness`` as a gate does: through a store that counts writes,
    with a model and tools that count calls; asserts none of them happened."""
    watched = WatchedStore(store)
    model, tools = CountingModel(), RecordingTools()
    head = await store.head(cid)
    opened = await Journal.open(
        cast(LogStore, watched), cid, fence=NOT_MINTED, model=model, tools=tools
    )
    result = await opened.check(harness, versioning=versioning(version, "upgrade"))
    assert watched.writes == [] and model.calls == [] and tools.calls == []
    assert await store.head(cid) == head
    return result


async def complete_one(store: Store, cid: str) -> None:
    """A finished v1 execution: it looked something up, then answered."""
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    await j.exec(Assistant("v1"), [user("lookup the order")], versioning=versioning("v1"))


async def test_a_log_the_code_still_makes_is_compatible_parked_run_included(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    await complete_one(store, cid)
    await park(store, cid)
    result = await check(store, cid, Assistant("v1"))
    assert result == ReplayCheck(executions=2, pending=True, diverged=None)
    assert result.compatible


async def test_a_decided_gate_is_still_pending_until_the_run_resumes(store: Store) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    assert await check(store, cid, Assistant("v1")) == ReplayCheck(1, True)
    tools = RecordingTools()
    j = await journal(store, cid, model=planning_model(), tools=tools)
    assert (await j.resume(Assistant("v1"), versioning=versioning("v1"))).output == DONE
    assert await check(store, cid, Assistant("v1")) == ReplayCheck(1, False)


async def test_another_prompt_diverges_on_the_parked_runs_first_model_call(
    store: Store,
) -> None:
    """The gate's question: would the resume of the parked run fail? It names the seq, the
    versions and what differs, and returns it (a strict check even for an upgrade)."""
    cid = await new_conversation(store)
    await park(store, cid)
    result = await check(store, cid, Assistant("v2"), "v2")
    assert result.pending and result.executions == 1
    diverged = result.diverged
    assert isinstance(diverged, ReplayDiverged)
    assert diverged.expected is not None and diverged.got is not None
    assert diverged.expected["kind"] == diverged.got["kind"] == "model_called"
    assert (diverged.from_version, diverged.to_version) == ("v1", "v2")
    assert diverged.differs == ("system prompt",)
    [called] = [r for r in await store.read(cid) if r.kind == "model_called"]
    assert diverged.seq == called.seq


async def test_a_completed_execution_diverges_first_and_stops_the_check(store: Store) -> None:
    cid = await new_conversation(store)
    await complete_one(store, cid)
    await park(store, cid)
    result = await check(store, cid, Assistant("v2"), "v2")
    assert result.executions == 1 and result.pending
    first = next(r.seq for r in await store.read(cid) if r.kind == "model_called")
    assert result.diverged is not None and result.diverged.seq == first


async def test_code_that_calls_another_tool_is_a_structural_divergence(store: Store) -> None:
    cid = await new_conversation(store)
    await park(store, cid)
    renamed = Assistant("v1", tool_name={"send_email": "send_mail"})
    diverged = (await check(store, cid, renamed)).diverged
    assert diverged is not None and diverged.expected is not None and diverged.got is not None
    assert diverged.expected["kind"] == diverged.got["kind"] == "tool_called"


@pytest.mark.parametrize(
    ("cut_at", "occurrence"),
    [("model_called", 1), ("assistant_message_completed", 1), ("tool_called", 1)],
)
async def test_a_run_cut_by_a_crash_is_checked_up_to_where_it_stopped(
    store: Store, cut_at: str, occurrence: int
) -> None:
    """A crash after the intent (no answer yet), after the answer, after a tool's intent (no
    outcome yet): what a resume would do next is live, so the prefix is compatible."""
    cid = await new_conversation(store)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    await j.exec(Assistant("v1"), [user("lookup and charge")], versioning=versioning("v1"))
    cut = await cut_after(store, cid, cut_at, occurrence)
    assert await check(cut, cid, Assistant("v1")) == ReplayCheck(1, True)
    assert not (await check(cut, cid, Assistant("v2"), "v2")).compatible


async def test_code_that_ends_a_pending_run_early_leaves_effects_unconsumed(
    store: Store,
) -> None:
    class Quits:
        name, version = "assistant", "1"

        async def run(self, turn: Turn) -> JsonValue:
            return "nothing to do"

    cid = await new_conversation(store)
    await park(store, cid)
    diverged = (await check(store, cid, Quits())).diverged
    assert diverged is not None and diverged.got == {"kind": "execution_ended"}


async def test_a_harness_that_swallows_the_end_of_the_prefix_is_still_compatible(
    store: Store,
) -> None:
    class Swallows(Assistant):
        async def run(self, turn: Turn) -> JsonValue:
            try:
                return await super().run(turn)
            except Exception:
                return "handled"

    cid = await new_conversation(store)
    await park(store, cid)
    assert (await check(store, cid, Swallows("v1"))).compatible


async def test_another_harness_is_checked_and_named(store: Store) -> None:
    cid = await new_conversation(store)
    await park(store, cid)
    assert (await check(store, cid, Assistant("v1", harness_version="2"))).compatible
    diverged = (await check(store, cid, Assistant("v2", harness_version="2"), "v2")).diverged
    assert diverged is not None and "harness" in diverged.differs


async def test_a_log_without_executions_checks_nothing(store: Store) -> None:
    cid = await new_conversation(store)
    assert await check(store, cid, Assistant("v1")) == ReplayCheck(0, False)


async def test_a_run_whose_submission_settled_is_not_pending(store: Store) -> None:
    """A run that failed for good (its submission settled) is never resumed: the next
    execution closes it instead, so the check replays only what completed."""
    cid = await new_conversation(store)
    await complete_one(store, cid)
    j = await Journal.open(
        store, cid, model=planning_model(), tools=RecordingTools(), stamp=Stamp("sub-1", "a-1")
    )
    with pytest.raises(ApprovalParked):
        await j.exec(Assistant("v1"), [user(EMAIL)], versioning=versioning("v1"))
    await j.refresh()
    settled = SubmissionSettled(status=SettlementStatus.FAILED, error="gave up")
    await j.log.append([j.log.draft(settled, None)])
    assert await check(store, cid, Assistant("v1")) == ReplayCheck(1, False)
    later = await check(store, cid, Assistant("v2"), "v2")
    assert (later.executions, later.pending) == (1, False) and later.diverged is not None
