"""``needs_approval`` tools park for a Tether approval (issue 25 item 2), over the fake OpenAI API.

The SDK's own interruption is not used: the execution parks durably (the submission waits,
the gate is listed by ``runtime.approvals()``), an approval runs the tool once, a rejection
gives the model a denial as the tool's result, and a replay sends no request and runs no tool.
"""

from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, function_tool

from tether.engine import Runtime
from tether.integrations.openai_agents import durable
from tether.journal import Decision
from tether.store import Store, SubmissionStatus

from ...engine.test_control import wait_for_status
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from ..approvals import decide_parked
from .over_http import MODEL, replay_sends_nothing

Make = Callable[..., Runtime]


class Shop:
    def __init__(self) -> None:
        self.refunds: list[str] = []


async def above_100(ctx: RunContextWrapper[Any], args: dict[str, Any], call_id: str) -> bool:
    return float(args.get("amount", 0)) > 100


def shop_agent(shop: Shop, needs_approval: Any = True) -> Agent[Any]:
    @function_tool(needs_approval=needs_approval)
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        shop.refunds.append(order_id)
        return f"refunded {amount} on {order_id}"

    return Agent(name="shop", instructions="Help.", model=MODEL, tools=[refund])


def expert_agent(shop: Shop) -> Agent[Any]:
    @function_tool
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        shop.refunds.append(order_id)
        return f"refunded {amount} on {order_id}"

    expert = Agent(name="refunder", instructions="Refund.", model=MODEL, tools=[refund])
    tool = expert.as_tool(
        tool_name="refund", tool_description="Refund an order.", needs_approval=True
    )
    return Agent(name="shop", instructions="Help.", model=MODEL, tools=[tool])


def outputs(fake: FakeOpenAI) -> list[str]:
    """The tool results the model was sent, request by request."""
    return [
        str(item.get("output"))
        for request in fake.requests
        for item in request.body.get("input", [])
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


REFUND = Answer(calls=(Call("refund", {"order_id": "42", "amount": 250}),))


@pytest.mark.parametrize(
    ("decision", "args", "refunded", "result"),
    [
        ("approve", None, ["42"], "refunded 250.0 on 42"),
        ("edit", {"order_id": "42", "amount": 99}, ["42"], "refunded 99.0 on 42"),
        ("reject", None, [], "Tool execution was denied by ann: no."),
    ],
)
async def test_a_needs_approval_tool_parks_for_a_tether_decision(
    decision: Decision,
    args: Any,
    refunded: list[str],
    result: str,
    fake: FakeOpenAI,
    make_runtime: Make,
    store: Store,
) -> None:
    shop = Shop()
    fake.add(REFUND, Answer(text="Done."))
    async with make_runtime({"shop": durable(shop_agent(shop), name="agent")}) as runtime:
        receipt = await runtime.dispatch("shop", "me", "refund order 42")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        [gate] = (await runtime.approvals()).gates
        assert gate.tool == "refund" and shop.refunds == [] and fake.count == 1
        gated, answer = await decide_parked(runtime, store, receipt, decision, args)
    assert gated == {"order_id": "42", "amount": 250}
    assert answer == "Done."
    assert shop.refunds == refunded  # run once when approved, never when rejected
    assert outputs(fake) == [result]  # a rejection is the model's tool result
    assert fake.count == 2
    replayed = await replay_sends_nothing(
        store, fake, receipt.conversation_id, lambda: shop_agent(shop)
    )
    assert replayed == ["Done."] and shop.refunds == refunded


async def test_a_callable_needs_approval_parks_only_the_calls_it_asks_for(
    fake: FakeOpenAI, make_runtime: Make
) -> None:
    shop = Shop()
    small = Answer(calls=(Call("refund", {"order_id": "7", "amount": 5}),))
    fake.add(small, Answer(text="Done."))
    async with make_runtime(
        {"shop": durable(shop_agent(shop, above_100), name="agent")}
    ) as runtime:
        receipt = await runtime.dispatch("shop", "me", "refund order 7")
        settled = await runtime.wait(receipt.submission_id)
        assert not (await runtime.approvals()).gates
    assert settled == {"status": "succeeded", "result": "Done."} and shop.refunds == ["7"]


async def test_an_agent_as_tool_with_needs_approval_parks_before_its_nested_run(
    fake: FakeOpenAI, make_runtime: Make, store: Store
) -> None:
    shop = Shop()
    nested = Answer(calls=(Call("refund", {"order_id": "42", "amount": 250}),))
    fake.add(
        Answer(calls=(Call("refund", {"input": "refund 42"}),)),
        nested,
        Answer(text="Refunded."),
        Answer(text="Done."),
    )
    async with make_runtime({"shop": durable(expert_agent(shop), name="agent")}) as runtime:
        receipt = await runtime.dispatch("shop", "me", "refund order 42")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        assert fake.count == 1 and shop.refunds == []  # nothing of the nested run yet
        _, answer = await decide_parked(runtime, store, receipt, "approve", None)
    assert answer == "Done." and shop.refunds == ["42"] and fake.count == 4
    replayed = await replay_sends_nothing(
        store, fake, receipt.conversation_id, lambda: expert_agent(shop)
    )
    assert replayed == ["Done."] and shop.refunds == ["42"]
