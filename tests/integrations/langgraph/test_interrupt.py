"""LangGraph ``interrupt()`` parks the session as a Tether input; the answer resumes the graph
as ``Command(resume=answer)`` does (issue 25 item 2, gap 2). A real graph on ChatOpenAI, over
HTTP to the fake OpenAI server."""

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from pydantic import JsonValue

from tether.engine import Runtime
from tether.errors import InvalidAnswer
from tether.integrations.langgraph import (
    CompiledGraph,
    JournaledChatModel,
    LangGraphHarness,
    durable,
)
from tether.integrations.langgraph._state import STATE_STEP
from tether.journal import Journal
from tether.records import Record, StepRecorded
from tether.store import Gate, Store, SubmissionStatus

from ...engine.test_control import wait_for_status
from ...engine.waits import until_emitted
from ...fakes.openai_server import Answer, FakeOpenAI
from .app import VERDICT, chat_openai, reviewer, reviewing

Make = Callable[..., Runtime]
DRAFT, SENT = "Dear team, the tide is in.", "Sent, with the reviewer's note."


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI([Answer(text=DRAFT), Answer(text=SENT)]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake")
        yield server


def state_step(record: Record) -> dict[str, Any] | None:
    """The record's payload if it is the state an execution ended with (not a streamed
    update or custom event)."""
    if not isinstance(record.payload, StepRecorded) or record.payload.name != STATE_STEP:
        return None
    return record.payload.to_json_object()


async def pending_input(runtime: Runtime, after: int = 0) -> Gate:
    """The input the run waits on, once it asks one past the ``after`` first (the run parks
    on it: an event)."""

    async def asked() -> Gate | None:
        gates = (await runtime.inputs()).gates
        if gates and gates[0].seq > after:
            [gate] = gates
            return gate
        return None

    return await until_emitted(runtime, asked)


async def settle(runtime: Runtime, submission_id: str) -> dict[str, JsonValue]:
    async with asyncio.timeout(60):
        return await runtime.wait(submission_id)


async def test_interrupts_park_as_inputs_and_answers_resume_the_graph(
    make_runtime: Make, store: Store, fake: FakeOpenAI
) -> None:
    async with make_runtime({"review": reviewing()}) as runtime:
        receipt = await runtime.dispatch("review", "acme", "Tell the team about the tide.")
        first = await pending_input(runtime)
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        assert first.tool == "interrupt" and first.call_id == "ask-1"
        assert first.args == {"value": {"question": "Send this draft?", "draft": DRAFT}}
        assert json.loads(str(first.prompt)) == first.args["value"]
        assert first.answer_schema == VERDICT
        with pytest.raises(InvalidAnswer):  # the interrupt's response_schema holds
            await runtime.answer(first.approval_id, "maybe", responder="ann")
        await runtime.answer(first.approval_id, "send", responder="ann")
        # The node's second interrupt() is a second input of its own.
        second = await pending_input(runtime, after=first.seq)
        assert (second.prompt, second.args, second.call_id) == (
            "Any note for the record?",
            {"value": "Any note for the record?"},
            "ask-2",
        )
        assert fake.count == 1  # the resumed run served the draft from the log
        await runtime.answer(second.approval_id, "cc legal", responder="bob")
        outcome = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert outcome == {"status": "succeeded", "result": SENT}
    # interrupt() returned the answers, as Command(resume=...) makes it: the model was told.
    assert fake.count == 2
    told = fake.requests[1].body["messages"][-1]
    assert told == {"role": "user", "content": "The reviewer says send: cc legal"}
    kinds = [r.kind for r in records]
    assert kinds.count("input_requested") == 2 and kinds.count("input_answered") == 2
    [state] = [s for s in map(state_step, records) if s is not None]
    assert state["value"] == {"verdict": "send", "note": "cc legal"}
    # A replay serves the model calls and both answers from the log.
    replayer = LangGraphHarness(reviewer, model=chat_openai(), name="review")
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(replayer) == [SENT]
    assert fake.count == 2


async def test_an_abort_while_parked_closes_the_input(make_runtime: Make, fake: FakeOpenAI) -> None:
    async with make_runtime({"review": reviewing()}) as runtime:
        receipt = await runtime.dispatch("review", "acme", "Tell the team.")
        gate = await pending_input(runtime)
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        await runtime.abort_submission(receipt.submission_id)
        outcome = await settle(runtime, receipt.submission_id)
        closed = (await runtime.inputs(status=None)).gates
        # The session goes on: the next submission runs the graph afresh, and asks again.
        await runtime.dispatch("review", "acme", "Tell the team, again.")
        again = await pending_input(runtime, after=gate.seq)
    assert outcome["status"] == "aborted"
    assert [(g.approval_id, g.status.value) for g in closed] == [(gate.approval_id, "closed")]
    assert again.args == {"value": {"question": "Send this draft?", "draft": SENT}}


def asks_twice_in_parallel(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    """Two nodes of one step interrupt at once: each question is an input, in node order."""

    async def left(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"left: {interrupt('left?')}")]}

    async def right(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"right: {interrupt('right?')}")]}

    async def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    for name, node in (("left", left), ("right", right), ("answer", answer)):
        graph.add_node(name, node)
    graph.add_edge(START, "left")
    graph.add_edge(START, "right")
    graph.add_edge(["left", "right"], "answer")
    graph.add_edge("answer", END)
    return graph.compile()


async def test_interrupts_of_one_step_are_asked_in_turn(
    make_runtime: Make, fake: FakeOpenAI
) -> None:
    agent = durable(asks_twice_in_parallel, model=chat_openai(), name="both")
    async with make_runtime({"both": agent}) as runtime:
        receipt = await runtime.dispatch("both", "acme", "go")
        left = await pending_input(runtime)
        await runtime.answer(left.approval_id, "L", responder="ann")
        right = await pending_input(runtime, after=left.seq)
        await runtime.answer(right.approval_id, "R", responder="ann")
        outcome = await settle(runtime, receipt.submission_id)
    assert (left.prompt, right.prompt) == ("left?", "right?")
    assert outcome == {"status": "succeeded", "result": DRAFT}
    contents = [m.get("content") for m in fake.requests[0].body["messages"]]
    assert contents == ["go", "left: L", "right: R"]
