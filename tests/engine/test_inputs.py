"""Inputs in the engine: a run asks a person (``Turn.ask``) and parks; the answer, checked
against the request's schema, resumes it with the value in one commit; answers are final
and idempotent; an abort closes the question; replay serves the recorded answer."""

from collections.abc import Callable

import pytest
from pydantic import JsonValue

from tether.engine import Runtime
from tether.errors import InputClosed, InputConflict, InputNotFound, InputParked, InvalidAnswer
from tether.journal import Journal, Turn
from tether.messages import Mediation, ModelRequest, ToolCall
from tether.models import ScriptedModel
from tether.records import InputAnswered, InputRequested, ToolCalled, ToolOutcome
from tether.store import GateKind, GateStatus, Store, SubmissionStatus

from .agents import agent
from .test_control import wait_for_status
from .test_runtime import settle

Make = Callable[..., Runtime]

NAME: dict[str, JsonValue] = {"type": "string", "minLength": 1}


class Asker:
    """Asks for a name (typed), then for a colour through a model-offered input tool, and
    answers with what it was told and what the model made of it."""

    name, version = "asker", "1"

    async def run(self, turn: Turn) -> JsonValue:
        name = await turn.ask("What is your name?", schema=NAME)
        colour = await turn.tool(
            ToolCall(
                call_id="colour",
                name="ask_human",
                args={"question": "Favourite colour?"},
                idempotency_key=f"{turn.execution_id}:colour",
                mediation=Mediation.INPUT,
            )
        )
        request = ModelRequest(model="test", messages=(*turn.history, *turn.inputs))
        reply = await turn.model(request)
        return {"name": name, "colour": colour.data, "reply": reply.message.text}


class AskOnce:
    """Asks for a name and answers with it."""

    name, version = "ask-once", "1"

    async def run(self, turn: Turn) -> JsonValue:
        return await turn.ask("What is your name?", schema=NAME)


def asker(model: ScriptedModel | None = None) -> dict[str, object]:
    return {"ask": agent(Asker(), model or ScriptedModel(lambda request: "noted"))}


async def pending_input(runtime: Runtime, submission_id: str) -> str:
    await wait_for_status(runtime, submission_id, SubmissionStatus.WAITING)
    page = await runtime.inputs()
    [gate] = [gate for gate in page.gates if gate.submission_id == submission_id]
    return gate.approval_id


async def test_a_question_parks_and_its_answer_resumes_the_run(
    make_runtime: Make, store: Store
) -> None:
    model = ScriptedModel(lambda request: "noted")
    async with make_runtime(asker(model)) as runtime:
        receipt = await runtime.dispatch("ask", "acme", "hello")
        first = await pending_input(runtime, receipt.submission_id)
        [gate] = (await runtime.inputs()).gates
        assert gate.kind is GateKind.INPUT and gate.prompt == "What is your name?"
        assert gate.answer_schema == NAME and gate.tool == "ask"
        assert (await store.get_submission(receipt.submission_id)).wait_reason == "input"
        assert (await runtime.approvals()).gates == ()  # an input is no approval
        [session] = (await runtime.sessions()).sessions
        assert (session.pending_inputs, session.pending_approvals) == (1, 0)
        answered = await runtime.answer(first, "Ann", responder="ann")
        assert isinstance(answered.payload, InputAnswered) and answered.payload.value == "Ann"

        second = await pending_input(runtime, receipt.submission_id)
        [gate] = (await runtime.inputs()).gates
        assert gate.prompt == "Favourite colour?" and gate.tool == "ask_human"
        await runtime.answer(second, {"hex": "#00f"}, responder="ann")
        assert await settle(runtime, receipt.submission_id) == {
            "status": "succeeded",
            "result": {"name": "Ann", "colour": {"hex": "#00f"}, "reply": "noted"},
        }
        answered_gates = (await runtime.inputs(status=GateStatus.DECIDED)).gates
        assert [(g.answer, g.approver, g.decision) for g in answered_gates] == [
            ("Ann", "ann", "answer"),
            ({"hex": "#00f"}, "ann", "answer"),
        ]
        records = await runtime.records(receipt.conversation_id)
        kinds = [record.kind for record in records]
        assert kinds.count(InputRequested.KIND) == 2 and kinds.count(InputAnswered.KIND) == 2
        outcomes = [r.payload for r in records if isinstance(r.payload, ToolOutcome)]
        assert [o.data for o in outcomes] == ["Ann", {"hex": "#00f"}]
        calls = [r.payload for r in records if isinstance(r.payload, ToolCalled)]
        assert {call.mediation for call in calls} == {Mediation.INPUT}
        assert len(model.calls) == 1  # asking never calls the model

        # Replay serves both answers and the model's reply from the log.
        replayed = await (await Journal.open(store, receipt.conversation_id, fence=0)).replay(
            Asker()
        )
        assert replayed == [{"name": "Ann", "colour": {"hex": "#00f"}, "reply": "noted"}]


async def test_an_answer_must_fit_the_schema_and_is_final(make_runtime: Make) -> None:
    async with make_runtime(asker()) as runtime:
        receipt = await runtime.dispatch("ask", "acme", "hello")
        input_id = await pending_input(runtime, receipt.submission_id)
        head = len(await runtime.records(receipt.conversation_id))
        with pytest.raises(InvalidAnswer) as invalid:
            await runtime.answer(input_id, 42, responder="ann")
        assert invalid.value.field == "value" and "is not of type 'string'" in str(invalid.value)
        with pytest.raises(InvalidAnswer):
            await runtime.answer(input_id, "", responder="ann")
        assert len(await runtime.records(receipt.conversation_id)) == head  # nothing written

        first = await runtime.answer(input_id, "Ann", responder="ann")
        again = await runtime.answer(input_id, "Ann", responder="ann")
        assert again.seq == first.seq  # the same answer is the same record
        with pytest.raises(InputConflict):
            await runtime.answer(input_id, "Bob", responder="ann")
        with pytest.raises(InputNotFound):
            await runtime.answer(f"{receipt.conversation_id}.9999", "Ann", responder="ann")
        with pytest.raises(InputNotFound):
            await runtime.answer("no-dot", "Ann", responder="ann")


async def test_abort_closes_an_unanswered_question(make_runtime: Make) -> None:
    async with make_runtime(asker()) as runtime:
        receipt = await runtime.dispatch("ask", "acme", "hello")
        input_id = await pending_input(runtime, receipt.submission_id)
        await runtime.abort("ask", "acme")
        settled = await settle(runtime, receipt.submission_id)
        assert settled["status"] == "aborted"
        assert settled["error"] == "aborted while waiting for input"
        [gate] = (await runtime.inputs(status=None)).gates
        assert gate.status is GateStatus.CLOSED
        with pytest.raises(InputClosed):
            await runtime.answer(input_id, "Ann", responder="ann")


async def test_resume_parks_again_until_answered(make_runtime: Make, store: Store) -> None:
    async with make_runtime(asker()) as runtime:
        receipt = await runtime.dispatch("ask", "acme", "hello")
        input_id = await pending_input(runtime, receipt.submission_id)
    journal = await Journal.open(store, receipt.conversation_id, fence=1_000)
    with pytest.raises(InputParked) as parked:
        await journal.resume(Asker())
    assert parked.value.input_id == input_id
