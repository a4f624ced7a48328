"""Every way a run ends leaves a history a real provider accepts (issue 36, item 1).

An abort, a timeout, a failure, an exhausted attempt budget or a parent's cancel closes what
the run left open (a tool call without its result, a message cut mid-stream, a gate) in the
commit that settles it; a lost lease hands the run to a resume that closes or re-drives it;
retention keeps the history it cuts whole. Each path is checked the way a provider would
check it (``provider_rules.refusal``): on the transcript the log renders, and on the very
request the session's next turn sends its model. A Hypothesis test then draws sessions whose
turns end every way at random points, and checks every request any model was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from tether.agent import agent_spec, tool
from tether.engine import (
    AgentDefinition,
    AgentSpec,
    ManualClock,
    Receipt,
    Retention,
    Runtime,
)
from tether.errors import NoRunInFlight
from tether.journal import Decision, Turn, transcript
from tether.messages import Message, ModelRequest
from tether.models import ScriptedModel, ToolUse
from tether.records import ToolOutcome
from tether.store import MemoryStore, Store, SubmissionStatus
from tether.testing.storetest import CompleteStore

from ..fakes.provider_rules import refusal
from ..journal.harnesses import LoopHarness, planner
from .agents import agent, slow_tools
from .conftest import FAST
from .test_control import wait_for_status
from .test_runtime import settle
from .waits import advance_until, until_emitted

Make = Callable[..., Runtime]
WAIT = 60
STOPPED = (SubmissionStatus.SETTLED, SubmissionStatus.WAITING)


class Provider:
    """A scripted model that checks every request as a provider would, and keeps what it
    would have refused (so that a run goes on, and the test says what was wrong)."""

    def __init__(self, reply: Callable[[ModelRequest], object]) -> None:
        self.refused: list[str] = []
        self.model = ScriptedModel(self._answer)
        self._reply = reply

    def _answer(self, request: ModelRequest) -> object:
        problem = refusal(request.messages)
        if problem is not None:
            self.refused.append(problem)
        return self._reply(request)

    @property
    def last(self) -> Sequence[Message]:
        return self.model.calls[-1].messages


async def assert_whole(store: Store, conversation_id: str) -> list[ToolOutcome]:
    """The log's transcript is one a provider takes; returns the tool results it holds."""
    records = await store.read(conversation_id)
    problem = refusal(transcript(records))
    assert problem is None, problem
    return [r.payload for r in records if isinstance(r.payload, ToolOutcome)]


def planning_provider() -> Provider:
    return Provider(planner)


# --- each way a run ends --------------------------------------------------------------


def slow_agent(provider: Provider, started: asyncio.Event) -> dict[str, AgentDefinition]:
    return {"slow": agent(LoopHarness(), provider.model, slow_tools(3600, started))}


async def aborted_mid_tool(runtime: Runtime, started: asyncio.Event) -> Receipt:
    """A turn of ``slow`` aborted while its tool runs, settled."""
    first = await runtime.dispatch("slow", "acme", "lookup slowly")
    await asyncio.wait_for(started.wait(), WAIT)
    await runtime.abort("slow", "acme")
    assert (await settle(runtime, first.submission_id))["status"] == "aborted"
    return first


async def test_an_abort_while_a_tool_runs(make_runtime: Make, store: Store) -> None:
    started, provider = asyncio.Event(), planning_provider()
    async with make_runtime(slow_agent(provider, started)) as runtime:
        first = await aborted_mid_tool(runtime, started)
        [closing] = await assert_whole(store, first.conversation_id)
        assert closing.status == "unknown" and "(aborted)" in closing.content
        second = await runtime.dispatch("slow", "acme", "what time is it?")
        outcome = await settle(runtime, second.submission_id)
        assert outcome == {"status": "succeeded", "result": "echo: what time is it?"}
    assert provider.refused == []
    assert [m.role for m in provider.last] == ["user", "assistant", "tool", "user"]


async def test_an_abort_while_parked_on_an_approval(make_runtime: Make, store: Store) -> None:
    provider = planning_provider()
    agents = {"mail": agent(LoopHarness(), provider.model, slow_tools(0))}
    async with make_runtime(agents) as runtime:
        first = await runtime.dispatch("mail", "acme", "send_email and lookup")
        await wait_for_status(runtime, first.submission_id, SubmissionStatus.WAITING)
        await runtime.abort("mail", "acme")
        settled = await settle(runtime, first.submission_id)
        assert settled["error"] == "aborted while waiting for approval"
        outcomes = await assert_whole(store, first.conversation_id)
        assert {o.status for o in outcomes} == {"ok", "denied"}
        second = await runtime.dispatch("mail", "acme", "hello")
        assert (await settle(runtime, second.submission_id))["status"] == "succeeded"
    assert provider.refused == []


class AskOrEcho:
    """Asks a person when told to ("ask"), else answers with the model, on the history."""

    name, version = "ask-or-echo", "1"

    async def run(self, turn: Turn) -> JsonValue:
        if "ask" in turn.inputs[-1].text:
            return await turn.ask("What is your name?")
        request = ModelRequest(model="test", messages=(*turn.history, *turn.inputs))
        return (await turn.model(request)).message.text


async def test_an_abort_while_parked_on_an_input(make_runtime: Make, store: Store) -> None:
    provider = planning_provider()
    async with make_runtime({"ask": agent(AskOrEcho(), provider.model)}) as runtime:
        first = await runtime.dispatch("ask", "acme", "ask me")
        await wait_for_status(runtime, first.submission_id, SubmissionStatus.WAITING)
        await runtime.abort("ask", "acme")
        assert (await settle(runtime, first.submission_id))["status"] == "aborted"
        [closing] = await assert_whole(store, first.conversation_id)
        assert closing.status == "denied" and closing.content.startswith("No answer was given")
        second = await runtime.dispatch("ask", "acme", "hello")
        assert (await settle(runtime, second.submission_id))["status"] == "succeeded"
    assert provider.refused == [] and provider.last[-1].text == "hello"


def delegating_provider() -> Provider:
    def reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool" or "delegate" not in request.messages[-1].text:
            return "done"
        return [ToolUse("task", {"agent": "helper", "prompt": "dig"}, call_id="task-1")]

    return Provider(reply)


def slow_helper(started: asyncio.Event) -> AgentDefinition:
    @tool
    async def dig() -> str:
        """Dig for a long time."""
        started.set()
        await asyncio.sleep(3600)
        return "dug"

    helper = Provider(
        lambda request: "found" if request.messages[-1].role == "tool" else [ToolUse("dig")]
    )
    spec = agent_spec(helper.model, tools=[dig])
    return AgentDefinition(lambda instance, env: spec)


async def test_an_abort_while_waiting_for_children_and_the_childs_cancel(
    make_runtime: Make, store: CompleteStore
) -> None:
    """The parent's abort says what it was doing, and closes its task call; the child, cut
    short in its tool by its parent's cancel, closes that call too."""
    started, provider = asyncio.Event(), delegating_provider()
    spec = agent_spec(provider.model)
    agents = {
        "lead": AgentDefinition(lambda instance, env: spec),
        "helper": slow_helper(started),
    }
    async with make_runtime(agents, subagents={"lead": ["helper"]}) as runtime:
        first = await runtime.dispatch("lead", "acme", "delegate this")
        await asyncio.wait_for(started.wait(), WAIT)
        await wait_for_status(runtime, first.submission_id, SubmissionStatus.WAITING)
        await runtime.abort("lead", "acme")
        settled = await settle(runtime, first.submission_id)
        assert settled["error"] == "aborted while waiting for its children"
        [child] = await store.list_children(first.submission_id)
        assert (await settle(runtime, child.id))["errorCode"] == "cancelled_by_parent"
        [task] = await assert_whole(store, first.conversation_id)
        assert task.status == "unknown" and task.content.startswith("The subagent's task")
        [dig] = await assert_whole(store, child.conversation_id)
        assert dig.status == "unknown"
        second = await runtime.dispatch("lead", "acme", "hello")
        assert (await settle(runtime, second.submission_id))["status"] == "succeeded"
    assert provider.refused == []


async def test_a_timeout_while_a_tool_runs(store: Store) -> None:
    clock, started, provider = ManualClock(), asyncio.Event(), planning_provider()
    tools = slow_tools(3600 * 24, started)
    agents = {"slow": agent(LoopHarness(), provider.model, tools, timeout=60)}
    async with Runtime(agents, store, **{**FAST, "clock": clock}) as runtime:
        first = await runtime.dispatch("slow", "acme", "lookup slowly")
        await asyncio.wait_for(started.wait(), WAIT)
        settled = await advance_until(clock, runtime.wait(first.submission_id), step=30)
        assert settled["errorCode"] == "timeout_exceeded"
        [closing] = await assert_whole(store, first.conversation_id)
        assert "exceeded its timeout" in closing.content
        second = await runtime.dispatch("slow", "acme", "hello")
        assert (await settle(runtime, second.submission_id))["status"] == "succeeded"
    assert provider.refused == []


class FailsMidBatch:
    """Asks the model, then fails before running the tools it asked for: transiently
    (``ConnectionError``, another attempt) or for good."""

    name, version = "fails-mid-batch", "1"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def run(self, turn: Turn) -> JsonValue:
        request = ModelRequest(model="test", messages=(*turn.history, *turn.inputs))
        response = await turn.model(request)
        if response.message.tool_calls:
            raise self.error
        return response.message.text


@pytest.mark.parametrize(
    ("error", "code", "why"),
    [
        (ValueError("the harness broke"), "run_failed", "ValueError: the harness broke"),
        (ConnectionError("gone"), "attempt_budget_exhausted", "attempt budget of 1 exhausted"),
    ],
)
async def test_a_failure_or_an_exhausted_budget_between_the_call_and_its_tools(
    make_runtime: Make, store: Store, error: Exception, code: str, why: str
) -> None:
    provider = planning_provider()
    harness = FailsMidBatch(error)
    async with make_runtime({"f": agent(harness, provider.model, max_attempts=1)}) as runtime:
        first = await runtime.dispatch("f", "acme", "lookup and charge")
        settled = await settle(runtime, first.submission_id)
        assert settled["errorCode"] == code
        closing = await assert_whole(store, first.conversation_id)
        assert [o.status for o in closing] == ["error", "error"]
        assert all(f"did not run: {why}" in o.content for o in closing)
        second = await runtime.dispatch("f", "acme", "hello")
        assert (await settle(runtime, second.submission_id))["status"] == "succeeded"
    assert provider.refused == []


async def test_a_lost_lease_hands_the_run_to_a_resume_that_closes_the_call(
    make_runtime: Make, store: Store
) -> None:
    """A peer takes the claim while a tool that is not idempotent runs: the run gives up
    (its writes would be fenced), and the next attempt closes the call as unknown."""
    clock, started, provider = ManualClock(), asyncio.Event(), planning_provider()
    agents = {"slow": agent(LoopHarness(), provider.model, slow_tools(3600, started))}
    async with make_runtime(agents, clock=clock, lease=30, heartbeat=10) as runtime:
        first = await runtime.dispatch("slow", "acme", "charge slowly")
        await asyncio.wait_for(started.wait(), WAIT)
        running = await store.get_submission(first.submission_id)
        await store.release(running.id, attempt_id=str(running.attempt_id), last_error="taken")
        settled = await advance_until(clock, runtime.wait(first.submission_id), step=10)
        assert settled["status"] == "succeeded"
        [closing] = await assert_whole(store, first.conversation_id)
        assert closing.status == "unknown"
    assert provider.refused == []


async def test_retention_keeps_an_aborted_turns_history_whole(
    make_runtime: Make, store: Store
) -> None:
    started, provider = asyncio.Event(), planning_provider()
    async with make_runtime(slow_agent(provider, started)) as runtime:
        first = await aborted_mid_tool(runtime, started)
        for n in range(4):
            receipt = await runtime.dispatch("slow", "acme", f"hello {n}")
            await settle(runtime, receipt.submission_id)
        assert (await runtime.prune(Retention(keep_records=8))).truncated == 1
        await assert_whole(store, first.conversation_id)
        last = await runtime.dispatch("slow", "acme", "hello again")
        assert (await settle(runtime, last.submission_id))["status"] == "succeeded"
    assert provider.refused == [] and len(provider.last) > 2


# --- any interleaving ---------------------------------------------------------------------

ENDINGS = ("finish", "abort", "timeout", "lease_lost", "steer", "approve", "reject", "cancel")
"""How a drawn turn ends. While a tool runs: aborted, its deadline passes, a peer takes its
claim, or a steer joins it. Once parked on its gate: approved (``finish``, ``steer``,
``lease_lost`` too) or rejected, else aborted (``cancel``; ``abort`` and ``timeout`` too,
if nothing cut the run before its gate)."""


@dataclass(frozen=True)
class Plan:
    """One turn: the tools the model asks for (``lookup`` is idempotent, ``charge`` is not,
    ``send_email`` waits for approval), how it ends, and what follows it."""

    tools: tuple[str, ...]
    ending: str
    then: str  # "next", "compact" (a queued compaction first) or "fork" (go on in a fork)
    fork_at: float  # where in the log a fork is taken, as a fraction of it


PLANS = st.lists(
    st.builds(
        Plan,
        tools=st.lists(st.sampled_from(("lookup", "charge", "send_email")), max_size=3).map(tuple),
        ending=st.sampled_from(ENDINGS),
        then=st.sampled_from(("next", "next", "compact", "fork")),
        fork_at=st.floats(0, 1),
    ),
    min_size=1,
    max_size=4,
)


@dataclass
class Session:
    """A drawn session on a fresh in-memory store, on a manual clock."""

    clock: ManualClock = field(default_factory=ManualClock)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    provider: Provider = field(default_factory=planning_provider)
    store: MemoryStore = field(default_factory=MemoryStore)
    session: str = "default"
    conversations: set[str] = field(default_factory=set)

    def runtime(self) -> Runtime:
        tools = slow_tools(3600 * 24, self.started, self.release)

        async def summarize(messages: list[Message]) -> str:
            return f"{len(messages)} messages"

        spec = AgentSpec(
            harness=LoopHarness(), model=self.provider.model, tools=tools, summarize=summarize
        )
        agents = {"a": AgentDefinition(lambda instance, env: spec, timeout=60)}
        settings: dict[str, Any] = {**FAST, "lease": 30, "heartbeat": 10, "clock": self.clock}
        return Runtime(agents, self.store, **settings)

    async def until_settled(self, runtime: Runtime, submission_id: str) -> None:
        assert await self.settled_or_parked(runtime, submission_id), "parked"

    async def turn(self, runtime: Runtime, plan: Plan) -> str:
        """Run one drawn turn to its settlement; returns its conversation's id."""
        slow = bool({"lookup", "charge"} & set(plan.tools))
        if plan.ending in ("finish", "approve", "reject", "cancel") or not slow:
            self.release.set()
        else:
            self.release.clear()
        self.started.clear()
        text = " ".join(plan.tools) or "hello"
        receipt = await runtime.dispatch("a", "acme", text, session=self.session)
        self.conversations.add(receipt.conversation_id)
        await self._end(runtime, plan, receipt.submission_id)
        return receipt.conversation_id

    async def _end(self, runtime: Runtime, plan: Plan, sid: str) -> None:
        if not self.release.is_set():  # a tool runs until the ending comes
            await asyncio.wait_for(self.started.wait(), WAIT)
            if plan.ending == "abort":
                await runtime.abort("a", "acme", session=self.session)
            elif plan.ending == "lease_lost":
                running = await self.store.get_submission(sid)
                await self.store.release(sid, attempt_id=str(running.attempt_id))
            elif plan.ending == "steer":
                with contextlib.suppress(NoRunInFlight):  # it may have moved on already
                    await runtime.steer("a", "acme", "also this", session=self.session)
            if plan.ending != "timeout":
                self.release.set()
        while not await self.settled_or_parked(runtime, sid):
            decision: Decision
            if plan.ending == "reject":
                decision = "reject"
            elif plan.ending in ("approve", "finish", "steer", "lease_lost"):
                decision = "approve"
            else:  # abort (one that came before the gate, too), cancel, timeout
                await runtime.abort("a", "acme", session=self.session)
                continue
            page = await runtime.approvals(agent="a")
            for gate in page.gates:
                await runtime.approve(gate.approval_id, decision, approver="ann")

    async def settled_or_parked(self, runtime: Runtime, sid: str) -> bool:
        """Whether the submission settled (else it is parked on a gate), moving time on a
        lease's renewal at a time until either."""

        async def stopped() -> SubmissionStatus | None:
            status = (await runtime.submission(sid)).status
            return status if status in STOPPED else None

        # Time moves only if it must: a run already over is not given a renewal more.
        status = await stopped() or await advance_until(
            self.clock, until_emitted(runtime, stopped), step=10
        )
        return status is SubmissionStatus.SETTLED

    async def then(self, runtime: Runtime, plan: Plan, conversation_id: str) -> None:
        if plan.then == "compact":
            receipt = await runtime.compact("a", "acme", session=self.session)
            await self.until_settled(runtime, receipt.submission_id)
        elif plan.then == "fork":
            head = len(await self.store.read(conversation_id))
            fork = await runtime.fork(conversation_id, at_seq=max(1, round(plan.fork_at * head)))
            self.session = fork.key.session
            self.conversations.add(fork.id)

    async def run(self, plans: Sequence[Plan]) -> None:
        async with self.runtime() as runtime:
            for plan in plans:
                conversation = await self.turn(runtime, plan)
                await self.then(runtime, plan, conversation)
            last = await runtime.dispatch("a", "acme", "and now?", session=self.session)
            await self.until_settled(runtime, last.submission_id)
        assert self.provider.refused == [], self.provider.refused
        for conversation_id in self.conversations:
            await assert_whole(self.store, conversation_id)


SOAK = bool(os.environ.get("TETHER_SOAK"))
EXAMPLES = int(os.environ.get("TETHER_PROPERTY_EXAMPLES", "300" if SOAK else "30"))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not SOAK,  # CI runs the same examples every time; a soak draws new ones
    suppress_health_check=[HealthCheck.too_slow],
)
@given(plans=PLANS)
async def test_any_interleaving_of_endings_leaves_every_history_whole(plans: list[Plan]) -> None:
    """Sessions of drawn turns, each ended a drawn way at a point where a tool runs or a gate
    waits, with compactions and forks between them: no model is ever sent a history a
    provider refuses, and every log's transcript stays whole."""
    await Session().run(plans)
