"""``Runtime.session_usage`` (issue 41, item 1): a session's spending counted from its journal
as its session budget counts it (children rolled up into their parent, a person's extensions
included), against that budget, and its open submission's against its own; on every store."""

from collections.abc import Callable

import pytest

from tether.engine import Budget, Runtime
from tether.errors import ConversationNotFound
from tether.messages import ModelRequest
from tether.models import ScriptedModel, ToolUse
from tether.store import Store, UsageSpent

from .test_budget import _parked, define, looping
from .test_runtime import settle

Make = Callable[..., Runtime]


def _calls(spent: UsageSpent) -> tuple[int, int]:
    return spent.model_calls, spent.tool_calls


async def test_a_session_counts_its_children_against_its_session_budget(make_runtime: Make) -> None:
    def parent_reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return "all done"
        return [ToolUse("task", {"agent": "researcher", "prompt": "X"}, call_id="t1")]

    agents = {
        "parent": define(
            ScriptedModel(parent_reply), tools=(), session_budget=Budget(tokens=10**6)
        ),
        "researcher": define(looping(), budget=Budget(model_calls=3)),
    }
    runtime = make_runtime(
        agents, subagents={"parent": ["researcher"]}, session_budget=Budget(model_calls=50)
    )
    await runtime.start()
    receipt = await runtime.dispatch("parent", "acme", "go")
    assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
    spend = await runtime.session_usage(receipt.conversation_id)
    # Its own two calls and its child's three (the child's own budget stopped it); no tool
    # call: a task call runs none of the host's, and a child's own count against its budget.
    assert _calls(spend.spent) == (5, 0)
    assert spend.budget is not None
    assert (spend.budget.model_calls, spend.budget.tokens) == (50, 10**6)  # limit by limit
    assert spend.key.agent == "parent" and spend.submission is None  # nothing open


async def test_a_parked_run_shows_its_own_budget_and_the_sessions_extended(
    make_runtime: Make, store: Store
) -> None:
    session = Budget(model_calls=2, on_exhausted="park")
    async with make_runtime({"a": define(looping())}, session_budget=session) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=Budget(model_calls=10))
        gate = await _parked(runtime, store, receipt.submission_id)
        spend = await runtime.session_usage(receipt.conversation_id)
        assert spend.budget is not None and spend.budget.model_calls == 2
        assert _calls(spend.spent) == (2, 2)
        opened = spend.submission
        assert opened is not None and opened.submission_id == receipt.submission_id
        assert opened.budget is not None and opened.budget.model_calls == 10
        assert _calls(opened.spent) == (2, 2)
        await runtime.decide_budget(
            gate.approval_id, "approve", extension={"modelCalls": 2}, approver="ops"
        )
        await _parked(runtime, store, receipt.submission_id)
        extended = await runtime.session_usage(receipt.conversation_id)
        assert extended.budget is not None and extended.budget.model_calls == 4
        assert extended.spent.model_calls == 4
        await runtime.abort_submission(receipt.submission_id)
        await settle(runtime, receipt.submission_id)
        later = await runtime.dispatch("a", "acme", "more")  # parks before its first call
        await _parked(runtime, store, later.submission_id)
        after = await runtime.session_usage(receipt.conversation_id)
        assert after.spent.model_calls == 4  # the session's, both runs together
        assert after.submission is None  # the open one has no budget of its own


async def test_a_session_without_a_budget_shows_its_spending_alone(make_runtime: Make) -> None:
    async with make_runtime({"a": define(looping())}) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=Budget(model_calls=3))
        await settle(runtime, receipt.submission_id)
        spend = await runtime.session_usage(receipt.conversation_id)
        assert spend.budget is None and spend.submission is None
        assert _calls(spend.spent) == (3, 3)
        assert spend.tenant is None and spend.key.instance == "acme"
        with pytest.raises(ConversationNotFound):
            await runtime.session_usage("no-such-conversation")
