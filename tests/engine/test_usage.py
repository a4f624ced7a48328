"""Usage and cost totals from the journaled completions."""

from collections.abc import Callable

from tether.engine import Runtime
from tether.messages import Message, ModelResponse, Usage
from tether.models import ScriptedModel

from ..journal.harnesses import EchoHarness
from .agents import agent, echo_agent
from .test_runtime import settle

Make = Callable[..., Runtime]


def reply(tokens: int) -> ModelResponse:
    return ModelResponse(
        message=Message.assistant("ok"), usage=Usage(input_tokens=tokens, output_tokens=2 * tokens)
    )


async def test_usage_totals_per_submission_and_session(make_runtime: Make) -> None:
    async with make_runtime({"echo": echo_agent(ScriptedModel([reply(10), reply(5)]))}) as runtime:
        first = await runtime.dispatch("echo", "acme", "one")
        await settle(runtime, first.submission_id)
        second = await runtime.dispatch("echo", "acme", "two")
        await settle(runtime, second.submission_id)
        session = await runtime.usage(first.conversation_id)
        one = await runtime.usage(first.conversation_id, submission_id=first.submission_id)
    assert (session.calls, session.input_tokens, session.output_tokens) == (2, 15, 30)
    assert (one.calls, one.input_tokens) == (1, 10)
    assert session.cost == 0.0  # the "test" model is in the price table at zero


async def test_an_unknown_model_has_an_unknown_cost(make_runtime: Make) -> None:
    class Priceless(EchoHarness):
        async def run(self, turn):  # type: ignore[no-untyped-def]
            from tether.messages import ModelRequest

            return (
                await turn.model(ModelRequest(model="mystery:model", messages=tuple(turn.inputs)))
            ).message.text

    async with make_runtime({"x": agent(Priceless(), ScriptedModel([reply(3)]))}) as runtime:
        receipt = await runtime.dispatch("x", "acme", "hi")
        await settle(runtime, receipt.submission_id)
        totals = await runtime.usage(receipt.conversation_id)
    assert totals.calls == 1 and totals.cost is None
