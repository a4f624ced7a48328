"""The crash matrix: cut a recorded session at every seq, resume the copy, check the invariants.

The session has three turns: a streamed answer after an idempotent tool, an email that
waits for approval, and two tools at once (one idempotent, one not). For every prefix of
its log, a fresh store gets a byte-identical copy (as if the writer died right after that
record) and the copy is resumed (approving the gate when it parks). Each cut must:

- complete its pending execution, with the output the original run produced;
- call the model exactly for the completions the prefix lacks, never for a recorded one;
- run each non-idempotent tool key at most once counting the original run, and re-run an
  idempotent or approved one only under its recorded key;
- replay afterwards with zero model calls, returning the original outputs.
"""

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from tether.errors import ApprovalParked, IncompleteInvocation
from tether.journal import Journal
from tether.models import ScriptedModel
from tether.records import (
    ApprovalDecided,
    AssistantMessageCompleted,
    ModelCalled,
    Record,
    ToolCalled,
)
from tether.store import MemoryStore, SqliteStore, Store
from tether.testing import RecordingTools, copy_prefix

from .harnesses import LoopHarness, journal, new_conversation, planner, user

TURNS = ("lookup the weather", "send_email to bob", "lookup and charge")


@dataclass
class Session:
    store: Store
    conversation_id: str
    records: list[Record]
    outputs: list[object]
    tools: RecordingTools


async def record_session(store: Store) -> Session:
    cid = await new_conversation(store)
    tools = RecordingTools()
    outputs: list[object] = []
    for text in TURNS:
        j = await journal(store, cid, model=ScriptedModel(planner, chunk=5), tools=tools)
        try:
            result = await j.exec(LoopHarness(), [user(text)])
        except ApprovalParked as parked:
            await (await journal(store, cid)).approve(parked.approval_id, "approve", approver="ann")
            result = await (
                await journal(store, cid, model=ScriptedModel(planner, chunk=5), tools=tools)
            ).resume(LoopHarness())
        outputs.append(result.output)
    return Session(store, cid, await store.read(cid), outputs, tools)


def executions_before(records: list[Record]) -> Counter[str]:
    """Tool keys the original run had executed by the end of this prefix (the worst case:
    a host tool runs right after its intent, an approved one right after its decision)."""
    ran: Counter[str] = Counter()
    gated: dict[str, str] = {}
    for record in records:
        payload = record.payload
        if isinstance(payload, ToolCalled):
            if payload.mediation == "approval":
                gated[payload.call_id] = payload.idempotency_key
            else:
                ran[payload.idempotency_key] += 1
        elif isinstance(payload, ApprovalDecided):
            ran[gated[payload.call_id]] += 1
    return ran


async def check_cut(session: Session, cut: int, target: Store) -> None:
    cid = session.conversation_id
    await copy_prefix(session.store, cid, cut, target)
    prefix = session.records[:cut]
    seeded = executions_before(prefix)
    tools = RecordingTools()
    tools.effects = {k: v for k, v in session.tools.effects.items() if k[1] in seeded}
    model = ScriptedModel(planner, chunk=5)
    probe = await Journal.open(target, cid, fence=0)
    pending = await probe.pending()
    if pending is not None and len(pending.inputs) < pending.started.input_count:
        # Only a cut inside the atomic [start, inputs] batch: no crash can leave this, and
        # resume says so rather than guess at the inputs.
        with pytest.raises(IncompleteInvocation):
            await (await journal(target, cid, model=model, tools=tools)).resume(LoopHarness())
        return

    result = None
    for _ in range(3):
        try:
            result = await (await journal(target, cid, model=model, tools=tools)).resume(
                LoopHarness()
            )
            break
        except ApprovalParked as parked:
            await (await journal(target, cid)).approve(
                parked.approval_id, "approve", approver="ann"
            )
    assert result is not None
    assert await (await Journal.open(target, cid, fence=0)).pending() is None, (
        f"cut {cut} did not complete"
    )

    if pending is not None:
        index = [e.id for e in await _executions(session)].index(pending.id)
        assert result.output == session.outputs[index], f"cut {cut}: different output"
        recorded = {
            r.payload.input_hash
            for r in prefix
            if isinstance(r.payload, ModelCalled) and r.execution_id == pending.id
        }
        answered = {
            r.payload.call_id
            for r in prefix
            if isinstance(r.payload, AssistantMessageCompleted) and not r.payload.interrupted
        }
        originally = [
            r.payload
            for r in session.records
            if isinstance(r.payload, ModelCalled) and r.execution_id == pending.id
        ]
        missing = [p for p in originally if p.call_id not in answered]
        assert model.invocations == len(missing), (
            f"cut {cut}: {model.invocations} calls, {len(missing)} missing"
        )
        served = {p.input_hash for p in originally if p.call_id in answered}
        assert not served & {call.input_hash() for call in model.calls}, (
            f"cut {cut}: a recorded call ran again"
        )
        assert recorded >= served
    else:
        assert not result.resumed and model.invocations == 0

    specs = {
        r.payload.idempotency_key: r.payload
        for r in await target.read(cid)
        if isinstance(r.payload, ToolCalled)
    }
    for key, count in tools.executions.items():
        spec = specs[key]  # every key run is a recorded call's key
        if spec.mediation == "host" and not spec.idempotent:
            assert seeded[key] + count <= 1, f"cut {cut}: non-idempotent {key} ran twice"

    completed = len([e for e in await _executions_of(target, cid) if e.completed])
    replayer = await Journal.open(target, cid, fence=0, model=ScriptedModel([]))
    assert await replayer.replay(LoopHarness()) == session.outputs[:completed]
    await target.verify(cid)


async def _executions(session: Session) -> list:  # type: ignore[type-arg]
    return await _executions_of(session.store, session.conversation_id)


async def _executions_of(store: Store, cid: str) -> list:  # type: ignore[type-arg]
    from tether.journal._executions import project

    return project(await store.read(cid, limit=100_000))


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_every_cut_resumes_exactly_once(backend: str, tmp_path: Path) -> None:
    source = MemoryStore()
    session = await record_session(source)
    kinds = [r.kind for r in session.records]
    assert {"assistant_text_delta", "approval_decided", "tool_outcome"} <= set(kinds)
    assert session.outputs == [f"done after {n} tool results" for n in (1, 2, 4)]
    for cut in range(1, len(session.records) + 1):
        if backend == "memory":
            target: Store = MemoryStore()
        else:
            target = await SqliteStore.open(tmp_path / f"cut-{cut}")
        try:
            await check_cut(session, cut, target)
        finally:
            await target.close()
