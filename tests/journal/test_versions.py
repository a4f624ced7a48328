"""Agent versions in the journal: the upgrade and strict policies, version changes, patches
(docs/architecture.md §5)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
from pydantic import JsonValue

from tether.errors import ApprovalParked, HarnessMismatch, NoPendingExecution, ReplayDiverged
from tether.journal import Journal, Turn, Versioning, diff_pins
from tether.messages import Message, ModelRequest, ToolCall
from tether.records import ExecutionStarted, PatchMarked, Record, ToolOutcome, VersionChanged
from tether.store import Store
from tether.testing import RecordingTools
from tether.testing.storetest import CompleteStore

from .harnesses import TOOLS, journal, new_conversation, planning_model, user
from .snapshots import taken_in, view_state
from .test_exec import kinds
from .test_resume import cut_after

EMAIL = "send_email to bob"
PROMPTS = {"v1": "You are helpful.", "v2": "You are helpful and brief.", "v3": "Be terse."}


def pins(version: str, *, harness: str = "assistant@1") -> dict[str, JsonValue]:
    digest = hashlib.sha256(PROMPTS[version].encode()).hexdigest()
    tools: dict[str, JsonValue] = dict.fromkeys(TOOLS, "schema-1")
    return {"harness": harness, "system": digest, "tools": tools, "model": "test"}


def versioning(version: str, policy: str = "strict") -> Versioning:
    assert policy in ("strict", "upgrade")
    return Versioning(version, pins(version), "upgrade" if policy == "upgrade" else "strict")


class Assistant:
    """The agent loop of ``LoopHarness`` under a system prompt, the part a deploy changes.

    ``patches``: the code of a later deploy, which asks ``turn.patched`` at the start
    (``early``) and once the loop is done (``late``); the code before it asks nothing and
    answers as an unpatched execution does."""

    name = "assistant"

    def __init__(
        self,
        version: str = "v1",
        *,
        harness_version: str = "1",
        patches: bool = False,
        tool_name: dict[str, str] | None = None,
    ) -> None:
        self.system = Message.system(PROMPTS[version])
        self.version = harness_version
        self.patches = patches
        self.tool_name = tool_name or {}

    async def run(self, turn: Turn) -> JsonValue:
        early = turn.patched("early") if self.patches else False
        messages = [self.system, *turn.history, *turn.inputs]
        for _ in range(8):
            request = ModelRequest(
                model="test", messages=tuple(messages), tools=tuple(TOOLS.values())
            )
            response = await turn.model(request)
            messages.append(response.message)
            if not response.message.tool_calls:
                late = turn.patched("late") if self.patches else False
                if self.patches:
                    assert turn.patched("late") is late  # asked again: the same answer
                return {"text": response.message.text, "early": early, "late": late}
            for part in response.message.tool_calls:
                spec = TOOLS[part.name]
                result = await turn.tool(
                    ToolCall(
                        call_id=part.call_id,
                        name=self.tool_name.get(part.name, part.name),
                        args=part.args,
                        idempotency_key=f"{turn.execution_id}:{part.call_id}",
                        mediation=spec.mediation,
                        idempotent=spec.idempotent,
                    )
                )
                messages.append(Message(role="tool", parts=(result.to_part(part.name),)))
        raise RuntimeError("too many rounds")


DONE: JsonValue = {"text": "done after 1 tool results", "early": False, "late": False}


def of_kind(records: Sequence[Record], kind: str) -> list[Record]:
    return [record for record in records if record.kind == kind]


def change_of(records: Sequence[Record]) -> tuple[Record, VersionChanged]:
    [record] = of_kind(records, "version_changed")
    assert isinstance(record.payload, VersionChanged)
    return record, record.payload


async def park(store: Store, cid: str) -> str:
    """Park a v1 run on an approval of ``send_email``; its approval id."""
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    with pytest.raises(ApprovalParked) as parked:
        await j.exec(Assistant("v1"), [user(EMAIL)], versioning=versioning("v1"))
    return parked.value.approval_id


async def park_and_approve(store: Store, cid: str) -> None:
    """Park a v1 run on an approval of ``send_email``, then approve it."""
    approval_id = await park(store, cid)
    await (await journal(store, cid)).approve(approval_id, "approve", approver="ann")


async def upgrade(store: Store, cid: str, tools: RecordingTools, version: str = "v2") -> JsonValue:
    j = await journal(store, cid, model=planning_model(), tools=tools)
    result = await j.resume(Assistant(version), versioning=versioning(version, "upgrade"))
    return result.output


# --- the upgrade policy ----------------------------------------------------------------


async def test_an_upgrade_runs_the_approved_tool_of_a_run_parked_under_another_prompt(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    tools = RecordingTools()
    assert await upgrade(store, cid, tools) == DONE
    assert [call.name for call in tools.calls] == ["send_email"]
    records = await store.read(cid)
    start = of_kind(records, "execution_started")[0].payload
    assert isinstance(start, ExecutionStarted) and start.version == "v1"
    assert start.pins == pins("v1")
    record, change = change_of(records)
    first_call = of_kind(records, "model_called")[0]
    assert change == VersionChanged(
        from_version="v1",
        to_version="v2",
        reason="upgrade",
        diverged_at=first_call.seq,
        differs=("system prompt",),
    )
    assert record.execution_id == first_call.execution_id
    # Durable before the tool's run was marked, and so before it ran.
    [marked] = of_kind(records, "step_recorded")
    [receipt] = of_kind(records, "tool_outcome")
    assert record.seq < marked.seq < receipt.seq
    assert kinds(records)[-2:] == ["assistant_message_completed", "execution_ended"]
    # The session goes on under the new version, its history read through the change.
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    after = await j.exec(Assistant("v2"), [user("thanks")], versioning=versioning("v2"))
    assert after.output == {"text": "echo: thanks", "early": False, "late": False}
    replayer = await Journal.open(store, cid, fence=0)
    assert await replayer.replay(Assistant("v2")) == [DONE, after.output]


async def test_a_second_resume_after_the_change_writes_no_second_one(store: Store) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    await upgrade(store, cid, RecordingTools())
    for crash_after in ("version_changed", "step_recorded"):
        cut = await cut_after(store, cid, crash_after)
        again = RecordingTools()
        output = await upgrade(cut, cid, again)
        assert output == DONE
        records = await cut.read(cid)
        change_of(records)  # one, the first resume's
        # Cut before the run was marked, the tool runs; after it, it may have: unknown.
        ran = crash_after == "version_changed"
        assert len(again.calls) == (1 if ran else 0)
        [receipt] = of_kind(records, "tool_outcome")
        assert isinstance(receipt.payload, ToolOutcome)
        assert receipt.payload.status.value == ("ok" if ran else "unknown")


async def test_a_change_of_harness_alone_is_journaled_under_upgrade(store: Store) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    harness = Assistant("v1", harness_version="2")
    with pytest.raises(HarnessMismatch):
        await (await journal(store, cid)).resume(harness, versioning=versioning("v1"))
    tools = RecordingTools()
    j = await journal(store, cid, model=planning_model(), tools=tools)
    upgraded = Versioning("v1.1", pins("v1", harness="assistant@2"), "upgrade")
    assert (await j.resume(harness, versioning=upgraded)).output == DONE
    records = await store.read(cid)
    _, change = change_of(records)
    assert change.differs == ("harness",) and change.diverged_at is None
    assert (change.from_version, change.to_version) == ("v1", "v1.1")
    assert await (await Journal.open(store, cid, fence=0)).replay(harness) == [DONE]


async def test_a_changed_harness_and_prompt_are_one_change_at_the_first_call(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    upgraded = Versioning("v2", pins("v2", harness="assistant@2"), "upgrade")
    await j.resume(Assistant("v2", harness_version="2"), versioning=upgraded)
    records = await store.read(cid)
    _, change = change_of(records)
    assert change.differs == ("system prompt", "harness")
    assert change.diverged_at == of_kind(records, "model_called")[0].seq


async def test_a_structural_divergence_is_never_tolerated(store: Store) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    tools = RecordingTools()
    j = await journal(store, cid, model=planning_model(), tools=tools)
    renamed = Assistant("v2", tool_name={"send_email": "send_mail"})
    with pytest.raises(ReplayDiverged, match="differs in tool") as caught:
        await j.resume(renamed, versioning=versioning("v2", "upgrade"))
    assert (caught.value.from_version, caught.value.to_version) == ("v1", "v2")
    assert caught.value.differs == ("system prompt",)
    records = await store.read(cid)
    assert not tools.calls and not of_kind(records, "version_changed")  # nothing ran on v2
    assert kinds(records)[-1] == "execution_failed"
    assert await upgrade(store, cid, RecordingTools()) == DONE  # still resumable after a fix


async def test_effects_left_unconsumed_diverge_under_upgrade(store: Store) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)

    class Quitter:
        name, version = "assistant", "1"

        async def run(self, turn: Turn) -> JsonValue:
            request = ModelRequest(model="test", messages=(Message.system("new"), *turn.inputs))
            await turn.model(request)
            return "stopped early"

    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    with pytest.raises(ReplayDiverged, match="left: tool_called"):
        await j.resume(Quitter(), versioning=versioning("v2", "upgrade"))
    assert not of_kind(await store.read(cid), "version_changed")


# --- strict ----------------------------------------------------------------------------


async def test_strict_names_the_versions_and_what_differs(store: Store) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    tools = RecordingTools()
    j = await journal(store, cid, model=planning_model(), tools=tools)
    with pytest.raises(ReplayDiverged) as caught:
        await j.resume(Assistant("v2"), versioning=versioning("v2"))
    error = caught.value
    assert "model input hash mismatch" in str(error)
    assert str(error).endswith("(version v1 -> v2: system prompt)")
    assert (error.from_version, error.to_version, error.differs) == ("v1", "v2", ("system prompt",))
    assert not tools.calls and not of_kind(await store.read(cid), "version_changed")
    # Without versioning the same divergence says what it can (history), and names no version.
    with pytest.raises(ReplayDiverged) as unversioned:
        await (await journal(store, cid, model=planning_model())).resume(Assistant("v2"))
    assert unversioned.value.differs == ("history",)
    assert unversioned.value.from_version == "v1" and unversioned.value.to_version is None
    assert "(version" not in str(unversioned.value)  # code that named no version: as before
    # The run stays resumable: the code it started on finishes it.
    again = await journal(store, cid, model=planning_model(), tools=tools)
    assert (await again.resume(Assistant("v1"), versioning=versioning("v1"))).output == DONE
    assert len(tools.calls) == 1


async def test_an_operator_change_lets_a_strict_resume_serve_the_recorded_calls(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    j = await journal(store, cid)
    moved = VersionChanged(from_version="v1", to_version="v2", reason="operator", actor="ann")
    record = await j.record_version_change(moved)
    pending = await j.pending()
    assert pending is not None and record.execution_id == pending.id
    assert record.payload == moved and record.submission_id == pending.start.submission_id
    tools = RecordingTools()
    j = await journal(store, cid, model=planning_model(), tools=tools)
    assert (await j.resume(Assistant("v2"), versioning=versioning("v2"))).output == DONE
    assert len(tools.calls) == 1
    change_of(await store.read(cid))  # the operator's only: it covers the recorded calls
    with pytest.raises(NoPendingExecution):
        await (await journal(store, cid)).record_version_change(moved)


async def test_an_operator_change_may_come_before_the_decision(store: Store) -> None:
    cid = await new_conversation(store)
    approval_id = await park(store, cid)
    moved = VersionChanged(from_version="v1", to_version="v2", reason="operator")
    await (await journal(store, cid)).record_version_change(moved)
    with pytest.raises(ApprovalParked):  # still parked: the change decides nothing
        await (await journal(store, cid)).resume(Assistant("v2"), versioning=versioning("v2"))
    await (await journal(store, cid)).approve(approval_id, "approve", approver="ann")
    tools = RecordingTools()
    j = await journal(store, cid, model=planning_model(), tools=tools)
    assert (await j.resume(Assistant("v2"), versioning=versioning("v2"))).output == DONE
    assert len(tools.calls) == 1


async def test_a_version_change_restores_from_a_snapshot(
    store: CompleteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pending execution's change is kept by its snapshot: the restored view's resume is
    served the recorded calls the change covers."""
    monkeypatch.setattr("tether.journal._snapshot.MIN_RECORDS", 4)
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    moved = VersionChanged(from_version="v1", to_version="v2", reason="operator")
    await (await journal(store, cid)).record_version_change(moved)
    await (await taken_in(store, cid, snapshot=False)).save_snapshot(store, cid)
    restored = await taken_in(store, cid, snapshot=True)
    assert restored._snapshots.seq == await store.head(cid)  # it did start from the snapshot
    assert view_state(restored) == view_state(await taken_in(store, cid, snapshot=False))
    tools = RecordingTools()
    j = await Journal.open(store, cid, model=planning_model(), tools=tools, view=restored)
    assert (await j.resume(Assistant("v2"), versioning=versioning("v2"))).output == DONE
    assert len(tools.calls) == 1


# --- replay ----------------------------------------------------------------------------


async def test_an_upgraded_session_replays_against_the_new_code_only(store: Store) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)
    await upgrade(store, cid, RecordingTools())
    replayer = await Journal.open(store, cid, fence=0)
    assert await replayer.replay(Assistant("v2"), versioning=versioning("v2")) == [DONE]
    change, _ = change_of(await store.read(cid))
    for other in ("v1", "v3"):  # each differs in a call made after the change
        with pytest.raises(ReplayDiverged, match="model input hash mismatch") as caught:
            await replayer.replay(Assistant(other), versioning=versioning(other))
        assert caught.value.seq is not None and caught.value.seq > change.seq
        assert caught.value.from_version == "v2" and caught.value.to_version == other


async def test_an_unversioned_log_replays_as_before(store: Store) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    await j.exec(Assistant("v1"), [user("lookup the weather")])
    records = await store.read(cid)
    start = of_kind(records, "execution_started")[0]
    assert b'"version"' not in start.canonical and b'"pins"' not in start.canonical
    replayer = await Journal.open(store, cid, fence=0)
    expected: JsonValue = {"text": "done after 1 tool results", "early": False, "late": False}
    assert await replayer.replay(Assistant("v1")) == [expected]
    assert await replayer.replay(Assistant("v1"), versioning=versioning("v1")) == [expected]
    with pytest.raises(ReplayDiverged) as caught:
        await replayer.replay(Assistant("v2"), versioning=versioning("v2", "upgrade"))
    assert caught.value.differs == ("history",) and caught.value.from_version is None
    assert str(caught.value).endswith("(version unversioned -> v2: history)")
    with pytest.raises(ReplayDiverged) as unversioned:  # nothing to name: the message of old
        await replayer.replay(Assistant("v2"))
    assert unversioned.value.differs == ("history",)
    assert "model input hash mismatch" in str(unversioned.value)
    assert "(version" not in str(unversioned.value)
    assert await store.verify(cid) == len(records)


# --- patches -----------------------------------------------------------------------------


async def test_patched_is_marked_once_live_and_served_in_replay(store: Store) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    result = await j.exec(Assistant(patches=True), [user("hello")])
    assert result.output == {"text": "echo: hello", "early": True, "late": True}
    marks = [r.payload for r in of_kind(await store.read(cid), "patch_marked")]
    assert marks == [PatchMarked(patch_id="early"), PatchMarked(patch_id="late")]
    replayer = await Journal.open(store, cid, fence=0)
    assert await replayer.replay(Assistant(patches=True)) == [result.output]
    with pytest.raises(ReplayDiverged, match="recorded patch_marked"):
        await replayer.replay(Assistant())  # the patch removed while a marked run remains


async def test_patched_is_false_where_a_run_passed_before_the_patch(store: Store) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    old = await j.exec(Assistant(), [user("hello")])
    replayer = await Journal.open(store, cid, fence=0)
    assert await replayer.replay(Assistant(patches=True)) == [old.output]  # both False
    assert not of_kind(await store.read(cid), "patch_marked")


async def test_patched_on_resume_keeps_the_old_branch_then_marks_once_live(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    await park_and_approve(store, cid)  # parked by the code before the patch
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    result = await j.resume(Assistant(patches=True), versioning=versioning("v1"))
    # "early" came while the recorded calls remained; "late" once the turn was live.
    assert result.output == {"text": "done after 1 tool results", "early": False, "late": True}
    records = await store.read(cid)
    assert [r.payload for r in of_kind(records, "patch_marked")] == [PatchMarked(patch_id="late")]
    replayer = await Journal.open(store, cid, fence=0)
    assert await replayer.replay(Assistant(patches=True)) == [result.output]


# --- diff_pins ---------------------------------------------------------------------------


def test_diff_pins_says_what_changed_in_words() -> None:
    base: dict[str, JsonValue] = {
        "harness": "tether.agent@1",
        "system": "s1",
        "tools": {"send_email": "a", "lookup": "b", "charge": "c"},
        "model": "openai:gpt-4.1",
    }
    assert diff_pins(base, dict(base)) == ("history",)
    assert diff_pins(None, base) == ("history",) and diff_pins(base, None) == ("history",)
    changed: dict[str, JsonValue] = {
        "harness": "tether.agent@2",
        "system": "s2",
        "tools": {"send_email": "a2", "lookup": "b", "x": "d", "y": "e"},
        "model": "openai:gpt-5",
        "temperature": 0.2,
    }
    assert diff_pins(base, changed) == (
        "system prompt",
        "tool set: +x +y -charge",
        "tool schema: send_email",
        "model",
        "harness",
        "temperature",
    )
    assert diff_pins(base, {**base, "tools": "opaque"}) == ("tools",)


def test_a_version_change_omits_what_it_does_not_know() -> None:
    change = VersionChanged(from_version=None, to_version="v2", reason="upgrade", diverged_at=3)
    assert change.to_json_object() == {
        "toVersion": "v2",
        "reason": "upgrade",
        "divergedAt": 3,
        "differs": [],
    }
