"""The built-in agent loop through the engine, over memory and SQLite."""

import asyncio
from collections.abc import Callable

from pydantic import JsonValue

from tether.agent import ToolContext, agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.journal import Journal
from tether.messages import ModelRequest, ThinkingPart
from tether.models import Failure, Rule, ScriptedModel, Text, Thinking, ToolUse
from tether.records import ToolCalled, ToolOutcome, UserMessage
from tether.store import MemoryStore, Store, SubmissionStatus
from tether.testing import copy_prefix

from ..engine.test_control import wait_for_status
from ..engine.test_runtime import settle

Make = Callable[..., Runtime]


@tool(idempotent=True)
async def lookup(q: str) -> str:
    """Look something up."""
    return f"facts about {q}"


@tool
async def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def summary(request: ModelRequest) -> str:
    results = [m.parts[0].content for m in request.messages if m.role == "tool"]  # type: ignore[union-attr]
    return "answer: " + ", ".join(results)


def define(model: ScriptedModel, *tools: object, **kwargs: object) -> dict[str, AgentDefinition]:
    spec = agent_spec(model, tools=list(tools), **kwargs)  # type: ignore[arg-type]
    return {"bot": AgentDefinition(lambda instance, env: spec)}


async def test_a_multi_turn_tool_conversation(make_runtime: Make) -> None:
    model = ScriptedModel(
        [Rule("look", ToolUse("lookup", {"q": "tides"})), Rule("", summary, on="tool")],
        default="hello again",
    )
    async with make_runtime(define(model, lookup, system_prompt="Be brief.")) as runtime:
        first = await runtime.dispatch("bot", "acme", "look it up")
        assert (await settle(runtime, first.submission_id))["result"] == "answer: facts about tides"
        second = await runtime.dispatch("bot", "acme", "thanks")
        assert (await settle(runtime, second.submission_id))["result"] == "hello again"
    last = model.calls[-1].messages
    assert last[0].role == "system" and last[0].text == "Be brief."
    assert [m.role for m in last[1:]] == ["user", "assistant", "tool", "assistant", "user"]


async def test_a_parallel_tool_batch_correlates(make_runtime: Make, store: Store) -> None:
    batch = [
        ToolUse("add", {"a": 1, "b": 2}, "c1"),
        ToolUse("add", {"a": 3, "b": 4}, "c2"),
        ToolUse("lookup", {"q": "x"}, "c3"),
    ]
    model = ScriptedModel([Rule("go", batch), Rule("", summary, on="tool")])
    async with make_runtime(define(model, add, lookup)) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "go")
        assert (await settle(runtime, receipt.submission_id))[
            "result"
        ] == "answer: 3, 7, facts about x"
    records = await store.read(receipt.conversation_id)
    called = [r.payload.call_id for r in records if isinstance(r.payload, ToolCalled)]
    outcomes = [r.payload.call_id for r in records if isinstance(r.payload, ToolOutcome)]
    assert sorted(called) == sorted(outcomes) == ["c1", "c2", "c3"]
    keys = {r.payload.idempotency_key for r in records if isinstance(r.payload, ToolCalled)}
    assert len(keys) == 3 and all(":" in key for key in keys)


async def test_steers_after_a_tool_batch_and_follow_ups_after_an_answer(make_runtime: Make) -> None:
    release = asyncio.Event()

    @tool
    async def slow(ctx: ToolContext) -> str:
        """Slow."""
        await asyncio.wait_for(release.wait(), 60)
        return "slow done"

    def reply(request: ModelRequest) -> str | ToolUse:
        texts = [m.text for m in request.messages if m.role == "user"]
        if request.messages[-1].role == "user" and len(texts) == 1:
            return ToolUse("slow")
        return " | ".join(texts)

    model = ScriptedModel(reply)
    async with make_runtime(define(model, slow)) as runtime:
        host = await runtime.dispatch("bot", "acme", "start")
        await wait_for_status(runtime, host.submission_id, SubmissionStatus.RUNNING)
        steer = await runtime.steer("bot", "acme", "turn left")
        follow = await runtime.follow_up("bot", "acme", "and then?")
        release.set()
        outcome = await settle(runtime, host.submission_id)
        assert outcome["result"] == "start | turn left | and then?"
        for receipt in (steer, follow):
            assert (await settle(runtime, receipt.submission_id))["result"] == {
                "deliveredTo": host.submission_id
            }
    # The steer reached the model call right after the tool batch, the follow-up the one after.
    assert [m.text for m in model.calls[1].messages if m.role == "user"] == ["start", "turn left"]


async def test_transient_and_fatal_provider_errors(make_runtime: Make) -> None:
    flaky = ScriptedModel([Failure("transient", "overloaded"), "fine now"])
    async with make_runtime(define(flaky)) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "hi")
        assert (await settle(runtime, receipt.submission_id))["result"] == "fine now"
        # Retried within the model call, not by another attempt.
        assert (await runtime.submission(receipt.submission_id)).submission.attempt_count == 1
        assert flaky.invocations == 2
    fatal = ScriptedModel([Failure("fatal", "bad key")])
    async with make_runtime(define(fatal)) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "hi", session="other")
        outcome = await settle(runtime, receipt.submission_id)
        assert outcome["errorCode"] == "run_failed" and "bad key" in str(outcome["error"])
        assert fatal.invocations == 1


async def test_a_thinking_signature_survives_a_crash_and_resume(store: Store) -> None:
    reasoning = [
        Thinking("weighing options", signature="sig-Zm9v=="),
        ToolUse("lookup", {"q": "y"}, "c1"),
    ]
    model = ScriptedModel([Rule("think", reasoning), Rule("", summary, on="tool")])
    spec = agent_spec(model, tools=[lookup])
    conversation, _ = await store.ensure_conversation(
        __import__("tether").SessionKey("bot", "acme"),
        conversation_id="conv-t",
        created_at=__import__("datetime").datetime.now(__import__("datetime").UTC),
    )
    journal = await Journal.open(store, conversation.id, model=spec.model, tools=spec.tools)

    await journal.exec(spec.harness, [UserMessage(body="think first")])
    records = await store.read(conversation.id)
    cut_at = next(r.seq for r in records if r.kind == "tool_called")
    crashed = MemoryStore()
    await copy_prefix(store, conversation.id, cut_at, crashed)
    again = ScriptedModel([Rule("", summary, on="tool")])
    resumed = await (
        await Journal.open(crashed, conversation.id, model=again, tools=spec.tools)
    ).resume(spec.harness)
    assert resumed.output == "answer: facts about y"
    [thinking] = [p for p in again.calls[0].messages[-2].parts if isinstance(p, ThinkingPart)]
    assert thinking.signature == "sig-Zm9v==" and thinking.text == "weighing options"


async def test_signals_are_rendered_for_the_model(make_runtime: Make) -> None:
    model = ScriptedModel(lambda request: request.messages[-1].text)
    async with make_runtime(define(model)) as runtime:
        message: dict[str, JsonValue] = {
            "kind": "signal",
            "body": "paid <in full>",
            "signal": {"type": "order.paid", "sender": {"shop": "a&b"}, "tag": "t1"},
        }
        receipt = await runtime.dispatch("bot", "acme", message)
        outcome = await settle(runtime, receipt.submission_id)
    assert (
        outcome["result"]
        == '<signal type="order.paid" sender-shop="a&amp;b" tag="t1">paid &lt;in full&gt;</signal>'
    )


async def test_a_growing_history_renders_its_signals_to_the_same_objects(
    make_runtime: Make,
) -> None:
    """Each execution renders the whole history: a signal renders to the very object it did
    before, so the next request's input hash resumes across it rather than starting over."""
    model = ScriptedModel(lambda request: "ok")
    signal: dict[str, JsonValue] = {"kind": "signal", "body": "paid", "signal": {"type": "paid"}}
    async with make_runtime(define(model, system_prompt="terse")) as runtime:
        for body in (signal, "next", "and next"):
            receipt = await runtime.dispatch("bot", "acme", body)
            await settle(runtime, receipt.submission_id)
    rendered = [
        next(m for m in call.messages if m.text.startswith("<signal")) for call in model.calls
    ]
    assert rendered[0] is rendered[1] is rendered[2]
    assert model.calls[2].messages[1:4] == model.calls[1].messages[1:4]


async def test_text_steps_and_streaming(make_runtime: Make) -> None:
    model = ScriptedModel([[Text("part one, "), Text("part two")]], chunk=3)
    async with make_runtime(define(model)) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "hi")
        assert (await settle(runtime, receipt.submission_id))["result"] == "part one, part two"
