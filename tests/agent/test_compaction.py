"""Compaction by the agent: on a context overflow and past a token threshold; replayable."""

from collections.abc import Callable

from tether.agent import agent_spec, tool
from tether.agent._agent import SUMMARY_PROMPT
from tether.engine import (
    AgentDefinition,
    AgentSpec,
    Compacted,
    EngineEvent,
    RecoveryDecided,
    Runtime,
)
from tether.journal import Journal
from tether.models import Failure, Rule, ScriptedModel, Text, ToolUse
from tether.records import Compaction
from tether.store import Store

from ..engine.test_runtime import settle
from ..fakes.provider_rules import refusal

Make = Callable[..., Runtime]


@tool
async def fetch() -> str:
    """Fetch a long document."""
    return "x" * 400


async def test_an_overflow_compacts_and_retries(make_runtime: Make, store: Store) -> None:
    model = ScriptedModel(
        [
            Rule(SUMMARY_PROMPT, "the user greeted me twice"),
            Rule(
                lambda r: (
                    sum(m.role == "user" for m in r.messages) >= 3
                    and "Summary" not in r.messages[0].text
                ),
                Failure("overflow", "prompt is too long"),
            ),
        ],
        default="ok",
    )
    spec = agent_spec(model, model_name="test")
    events: list[EngineEvent] = []
    async with make_runtime(
        {"bot": AgentDefinition(lambda i, e: spec)}, observers=[events.append]
    ) as runtime:
        for text in ("hi", "hello", "third"):
            receipt = await runtime.dispatch("bot", "acme", text)
            assert (await settle(runtime, receipt.submission_id))["result"] == "ok"
        records = await store.read(receipt.conversation_id)
    [compaction] = [r for r in records if r.kind == "compaction"]
    assert isinstance(compaction.payload, Compaction) and compaction.payload.reason == "overflow"
    # Observers hear of it as of a manual compaction, and of the recovery it was.
    [recovery, compacted] = [e for e in events if isinstance(e, RecoveryDecided | Compacted)]
    assert isinstance(recovery, RecoveryDecided) and recovery.decision == "compact_overflow"
    assert recovery.detail == f"first kept seq {compaction.payload.first_kept_seq}"
    assert isinstance(compacted, Compacted) and compacted.reason == "overflow"
    assert recovery.correlation.submission_id == receipt.submission_id == compaction.submission_id
    assert compacted.correlation == recovery.correlation
    assert compaction.payload.summary == "the user greeted me twice"
    retried = model.calls[-1].messages
    assert retried[0].text.startswith("Summary of the conversation so far:")
    # Later turns see the summary too, and the whole log replays with no model call.
    assert (
        await (await Journal.open(store, receipt.conversation_id, fence=0)).replay(spec.harness)
        == ["ok"] * 3
    )


async def test_overflow_after_two_compactions_fails_the_run(make_runtime: Make) -> None:
    model = ScriptedModel(
        [Rule(SUMMARY_PROMPT, "summary")], default=Failure("overflow", "still too long")
    )
    spec = agent_spec(model, model_name="test")
    async with make_runtime({"bot": AgentDefinition(lambda i, e: spec)}) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "hi")
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == "run_failed" and "too long" in str(outcome["error"])


def reader(reading: object) -> tuple[ScriptedModel, AgentSpec]:
    """An agent with a small context that answers "read ..." with ``reading`` (a call of
    ``fetch``), then "done": the document it fetches passes its compaction threshold."""
    model = ScriptedModel(
        [
            Rule(SUMMARY_PROMPT, "fetched a long document"),
            Rule("read", reading),
            Rule("", "done", on="tool"),
        ],
        default="done",
    )
    spec = agent_spec(
        model,
        model_name="test",
        tools=[fetch],
        context_window=150,
        reserve_tokens=100,
        keep_tokens=120,
    )
    return model, spec


async def test_a_threshold_compacts_before_the_next_call(make_runtime: Make, store: Store) -> None:
    model, spec = reader(ToolUse("fetch"))
    events: list[EngineEvent] = []
    async with make_runtime(
        {"bot": AgentDefinition(lambda i, e: spec)}, observers=[events.append]
    ) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "read it " + "y" * 300)
        assert (await settle(runtime, receipt.submission_id))["result"] == "done"
    records = await store.read(receipt.conversation_id)
    reasons = [r.payload.reason for r in records if isinstance(r.payload, Compaction)]
    assert reasons == ["threshold"]
    # Planned, not a recovery: a Compacted event and no RecoveryDecided.
    assert [(type(e), getattr(e, "reason", None)) for e in events if isinstance(e, Compacted)] == [
        (Compacted, "threshold")
    ]
    assert not [e for e in events if isinstance(e, RecoveryDecided)]
    assert (
        model.calls[-1].messages[0].text
        == "Summary of the conversation so far:\nfetched a long document"
    )
    assert await (await Journal.open(store, receipt.conversation_id, fence=0)).replay(
        spec.harness
    ) == ["done"]


async def test_a_queued_compaction_is_heard_once(make_runtime: Make, store: Store) -> None:
    spec = agent_spec(ScriptedModel([Rule(SUMMARY_PROMPT, "a greeting")], default="ok"))
    events: list[EngineEvent] = []
    async with make_runtime(
        {"bot": AgentDefinition(lambda i, e: spec)}, observers=[events.append]
    ) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "hi")
        await settle(runtime, receipt.submission_id)
        compaction = await runtime.compact("bot", "acme")
        assert (await settle(runtime, compaction.submission_id))["result"] == {
            "compacted": True,
            "firstKeptSeq": 3,
        }
    [compacted] = [e for e in events if isinstance(e, Compacted)]
    assert compacted.reason == "manual"
    assert compacted.correlation.submission_id == compaction.submission_id


async def test_a_compaction_keeps_a_tool_result_with_the_call_that_asked_for_it(
    make_runtime: Make, store: Store
) -> None:
    """The budget would keep the document's result and not the long message that called for
    it: the kept messages must not start with a result that answers no call, which every
    provider refuses, in this turn's next request or in the transcript later turns get."""
    model, spec = reader([Text("Let me think about it. " + "z" * 600), ToolUse("fetch")])
    async with make_runtime({"bot": AgentDefinition(lambda i, e: spec)}) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "read it " + "y" * 300)
        assert (await settle(runtime, receipt.submission_id))["result"] == "done"
        again = await runtime.dispatch("bot", "acme", "and now?")
        assert (await settle(runtime, again.submission_id))["result"] == "done"
    assert [m.role for m in model.calls[2].messages] == ["user", "assistant", "tool"]
    assert all(refusal(call.messages) is None for call in model.calls)
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert refusal((await journal.refresh()).messages()) is None
