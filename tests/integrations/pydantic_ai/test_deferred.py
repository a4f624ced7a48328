"""pydantic-ai's deferred tools as Tether gates (issue 25 item 2, gap 4): a tool that raises
``ApprovalRequired`` (or whose args validator does) parks for a Tether approval instead of
failing the run, then runs approved (``ctx.tool_call_approved``), with edited arguments, or
not at all (the model reads the denial); a tool raising ``CallDeferred``, or an external
tool, parks for a Tether input whose answer is the tool's result."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import JsonValue
from pydantic_ai import Agent, ApprovalRequired, CallDeferred, RunContext, Tool
from pydantic_ai import messages as pa
from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

from tether.engine import Receipt, Runtime
from tether.integrations.pydantic_ai import PydanticAIHarness, durable
from tether.journal import UNKNOWN_OUTCOME, Decision, Journal
from tether.store import GateKind, MemoryStore, Store, SubmissionStatus
from tether.stream import DataContent, StreamTaskMessageFull, project
from tether.testing import copy_prefix

from ...engine.test_control import wait_for_status
from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from .test_adapter import refusing

Make = Callable[..., Runtime]


def script(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    """``<tool> <amount>`` calls that tool; a tool's result is answered with ``done: ...``."""
    returned = [p for p in messages[-1].parts if isinstance(p, pa.ToolReturnPart)]
    if returned:
        return pa.ModelResponse(parts=[pa.TextPart(f"done: {returned[-1].model_response_str()}")])
    prompt = next(
        p.content
        for m in reversed(messages)
        for p in m.parts
        if isinstance(p, pa.UserPromptPart) and isinstance(p.content, str)
    )
    tool, _, amount = prompt.partition(" ")
    if not amount:
        return pa.ModelResponse(parts=[pa.TextPart(f"{len(messages)} messages")])
    call = pa.ToolCallPart(tool, {"amount": int(amount)}, tool_call_id=f"call-{len(messages)}")
    return pa.ModelResponse(parts=[call])


def check_large(ctx: RunContext[None], amount: int) -> None:
    if amount > 100 and not ctx.tool_call_approved:
        raise ApprovalRequired({"reason": "large"})


def make_agent(model: Model | None = None, seen: list[Any] | None = None) -> Agent[None, str]:
    seen = [] if seen is None else seen

    async def checked_refund(ctx: RunContext[None], amount: int) -> str:
        seen.append(("checked_refund", ctx.tool_call_approved))
        return f"refunded {amount}"

    agent = Agent(
        model or FunctionModel(script, model_name="scripted"),
        name="shop",
        tools=[Tool(checked_refund, args_validator=check_large)],
        toolsets=[
            ExternalToolset(
                [
                    ToolDefinition(
                        name="warehouse",
                        parameters_json_schema={
                            "type": "object",
                            "properties": {"amount": {"type": "integer"}},
                        },
                    )
                ]
            )
        ],
    )

    @agent.tool
    async def refund(ctx: RunContext[None], amount: int) -> str:
        seen.append(("refund", ctx.tool_call_approved))
        if amount > 100 and not ctx.tool_call_approved:
            raise ApprovalRequired({"reason": "large"})
        return f"refunded {amount}"

    @agent.tool(requires_approval=True)
    async def wire(ctx: RunContext[None], amount: int) -> str:
        seen.append(("wire", ctx.tool_call_approved))
        return f"wired {amount}"

    @agent.tool_plain
    async def ship(amount: int) -> str:
        raise CallDeferred({"queue": "shipping"})

    return agent


async def parked(runtime: Runtime, receipt: Receipt) -> None:
    await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)


async def replayed(store: Store, receipt: Receipt) -> list[JsonValue]:
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    return await journal.replay(
        PydanticAIHarness(make_agent(FunctionModel(refusing, model_name="scripted")))
    )


DECISIONS: list[tuple[Decision, dict[str, JsonValue] | None, str]] = [
    ("approve", None, "done: refunded 500"),
    ("edit", {"amount": 120}, "done: refunded 120"),
    ("reject", None, "done: Tool execution was denied by ann: no."),
]


@pytest.mark.parametrize("tool", ["refund", "checked_refund", "wire"])
@pytest.mark.parametrize(("decision", "args", "expected"), DECISIONS)
async def test_a_tool_that_asks_for_approval_parks_for_a_tether_decision(
    make_runtime: Make,
    store: Store,
    tool: str,
    decision: Decision,
    args: dict[str, JsonValue] | None,
    expected: str,
) -> None:
    seen: list[Any] = []
    async with make_runtime({"shop": durable(make_agent(seen=seen))}) as runtime:
        receipt = await runtime.dispatch("shop", "me", f"{tool} 500")
        await parked(runtime, receipt)
        (gate,) = (await runtime.approvals()).gates
        assert (gate.tool, dict(gate.args), gate.kind) == (tool, {"amount": 500}, GateKind.APPROVAL)
        reason = "no" if decision == "reject" else None
        await runtime.approve(gate.approval_id, decision, approver="ann", reason=reason, args=args)
        settled = await settle(runtime, receipt.submission_id)
        assert settled["result"] == expected.replace(
            "refunded", "wired" if tool == "wire" else "refunded"
        )
        # The next turn's history holds one result for the call, as the model saw it.
        follow_up = await runtime.dispatch("shop", "me", "thanks")
        assert (await settle(runtime, follow_up.submission_id))["result"] == "5 messages"
    ran = [approved for name, approved in seen if name == tool]
    if decision == "reject":
        assert True not in ran  # the tool never ran approved
    else:
        assert ran[-1] is True  # ctx.tool_call_approved, where pydantic-ai has it
    assert (await replayed(store, receipt))[0] == settled["result"]


async def test_a_small_refund_needs_no_approval(make_runtime: Make) -> None:
    async with make_runtime({"shop": durable(make_agent())}) as runtime:
        receipt = await runtime.dispatch("shop", "me", "refund 5")
        assert (await settle(runtime, receipt.submission_id))["result"] == "done: refunded 5"
        assert not (await runtime.approvals(status=None)).gates


@pytest.mark.parametrize("tool", ["ship", "warehouse"])
async def test_a_deferred_or_external_tool_parks_for_an_input_whose_answer_is_its_result(
    make_runtime: Make, store: Store, tool: str
) -> None:
    async with make_runtime({"shop": durable(make_agent())}) as runtime:
        receipt = await runtime.dispatch("shop", "me", f"{tool} 3")
        await parked(runtime, receipt)
        assert not (await runtime.approvals()).gates
        (gate,) = (await runtime.inputs()).gates
        assert (gate.tool, dict(gate.args), gate.kind) == (tool, {"amount": 3}, GateKind.INPUT)
        assert gate.prompt == f'{tool}({{"amount":3}})'
        await runtime.answer(gate.approval_id, {"tracking": "Z9"}, responder="bob")
        settled = await settle(runtime, receipt.submission_id)
        assert settled["result"] == 'done: {"tracking":"Z9"}'
        follow_up = await runtime.dispatch("shop", "me", "thanks")
        assert (await settle(runtime, follow_up.submission_id))["result"] == "5 messages"
    assert (await replayed(store, receipt))[0] == settled["result"]


def tool_messages_match_calls(body: dict[str, Any]) -> list[str]:
    """The tool results a Chat Completions request sends, each after the call it answers."""
    offered: set[str] = set()
    answered: list[str] = []
    for message in body["messages"]:
        for call in message.get("tool_calls") or ():
            offered.add(call["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in offered, body["messages"]
            answered.append(message["tool_call_id"])
    assert len(answered) == len(set(answered)), body["messages"]
    return answered


@pytest.mark.parametrize("tool", ["refund", "checked_refund", "ship"])
async def test_over_http_the_gated_call_reads_back_as_one_result(
    make_runtime: Make, store: Store, fake: FakeOpenAI, tool: str
) -> None:
    fake.add(
        Answer(calls=(Call(tool, {"amount": 500}),)),
        Answer(text="Done."),
        Answer(text="You are welcome."),
    )
    agent = make_agent(infer_model("openai-chat:gpt-4.1-mini"))
    async with make_runtime({"shop": durable(agent)}) as runtime:
        receipt = await runtime.dispatch("shop", "me", "please")
        await parked(runtime, receipt)
        if tool == "ship":
            (gate,) = (await runtime.inputs()).gates
            await runtime.answer(gate.approval_id, "shipped", responder="bob")
        else:
            (gate,) = (await runtime.approvals()).gates
            await runtime.approve(gate.approval_id, "approve", approver="ann")
        assert (await settle(runtime, receipt.submission_id))["result"] == "Done."
        follow_up = await runtime.dispatch("shop", "me", "thanks")
        assert (await settle(runtime, follow_up.submission_id))["result"] == "You are welcome."
    assert fake.count == 3
    after_gate, next_turn = fake.requests[1].body, fake.requests[2].body
    (answered,) = tool_messages_match_calls(after_gate)
    assert tool_messages_match_calls(next_turn) == [answered]
    results = [m for m in next_turn["messages"] if m["role"] == "tool"]
    assert results[0]["content"] == ("shipped" if tool == "ship" else "refunded 500")
    assert json.loads(json.dumps(results)) == [
        m for m in after_gate["messages"] if m["role"] == "tool"
    ]
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    replay = PydanticAIHarness(make_agent(infer_model("openai-chat:gpt-4.1-mini")))
    assert await journal.replay(replay) == ["Done.", "You are welcome."]
    assert fake.count == 3


@pytest.mark.parametrize("tool", ["refund", "checked_refund"])
async def test_a_crash_after_the_approval_runs_the_tool_at_most_once(
    make_runtime: Make, store: Store, tool: str
) -> None:
    async with make_runtime({"shop": durable(make_agent())}) as runtime:
        receipt = await runtime.dispatch("shop", "me", f"{tool} 500")
        await parked(runtime, receipt)
        (gate,) = (await runtime.approvals()).gates
        await runtime.approve(gate.approval_id, "approve", approver="ann")
        assert (await settle(runtime, receipt.submission_id))["result"] == "done: refunded 500"
    records = await store.read(receipt.conversation_id)
    decided = next(r.seq for r in records if r.kind == "approval_decided")
    # Where the approved run is marked started: refund's approved_run step, or the call
    # checked_refund makes under its own id once its gate passed.
    started = next(
        r.seq for r in records if r.seq > decided and r.kind in ("step_recorded", "tool_called")
    )
    ran = next(r.seq for r in records if r.seq > started and r.kind == "tool_outcome")
    for cut in range(decided, ran):
        crashed = MemoryStore()
        await copy_prefix(store, receipt.conversation_id, cut, crashed)
        seen: list[Any] = []
        harness = PydanticAIHarness(make_agent(seen=seen))
        outcome = await (await Journal.open(crashed, receipt.conversation_id)).resume(harness)
        cut_short = cut >= started  # it may have run: not again
        expected = "done: " + UNKNOWN_OUTCOME if cut_short else "done: refunded 500"
        assert outcome.output == expected, cut
        assert [approved for name, approved in seen if name == tool].count(True) == (
            0 if cut_short else 1
        ), cut


@pytest.mark.parametrize(
    ("tool", "kind", "metadata"),
    [
        ("refund", "approval_requested", {"reason": "large"}),  # raised by the tool
        ("checked_refund", "approval_requested", {"reason": "large"}),  # by its validator
        ("wire", "approval_requested", None),  # requires_approval: nothing attached
        ("ship", "input_requested", {"queue": "shipping"}),  # CallDeferred
    ],
)
async def test_what_a_deferral_attached_goes_with_its_request(
    make_runtime: Make, tool: str, kind: str, metadata: dict[str, JsonValue] | None
) -> None:
    """``ApprovalRequired``/``CallDeferred`` metadata is on the approval or input request,
    and so on the canonical stream's ``approval_requested``/``input_requested`` event."""
    async with make_runtime({"shop": durable(make_agent())}) as runtime:
        receipt = await runtime.dispatch("shop", "me", f"{tool} 500")
        await parked(runtime, receipt)
        records = await runtime.records(receipt.conversation_id)
        asked = await (runtime.inputs() if kind == "input_requested" else runtime.approvals())
    [request] = [r.payload for r in records if r.kind == kind]
    assert getattr(request, "metadata") == metadata  # noqa: B009
    # ... and on the gate /approvals and /inputs list.
    [gate] = asked.gates
    assert gate.metadata == metadata
    [data] = [
        e.content.data
        for e in project(records)
        if isinstance(e, StreamTaskMessageFull)
        and isinstance(e.content, DataContent)
        and e.content.data.get("kind") == kind
    ]
    assert data.get("metadata") == metadata
