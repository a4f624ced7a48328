"""What a durable pydantic-ai agent journals, and what it refuses (issue 25 item 1).

Every construct below runs as a framework user would write it. A *covered* one is journaled:
its run settles, and a replay whose models all refuse to be called gives the same output
(zero model calls). A *refused* one fails loudly with ``NotJournaled`` (or ``NotInTurn``)
instead of running unrecorded. docs/pydantic-ai.md carries the same table; the ways of
driving a run are in test_drive.py, the deferred tools in test_deferred.py.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, ToolFailed
from pydantic_ai import messages as pa
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models import infer_model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from tether.engine import Runtime
from tether.integrations import NotInTurn
from tether.integrations.pydantic_ai import (
    Drive,
    JournaledAgent,
    JournaledModel,
    NotJournaled,
    PydanticAIHarness,
    UnsupportedConstruct,
    durable,
    journaled_agent,
)
from tether.integrations.pydantic_ai._agent import check_journalable
from tether.journal import Journal
from tether.store import Store

from ...engine.test_runtime import settle
from .app import DRIVES

Make = Callable[..., Runtime]
Reply = Callable[[list[pa.ModelMessage], AgentInfo], pa.ModelResponse]


def refuse(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    raise AssertionError("a replay called a model")


@dataclass
class Case:
    """A construct: ``build(reply_of)`` makes the durable agent, whose models answer with
    ``reply_of(name)`` (a refusing one on replay); ``prompt`` is sent; ``expected`` is the
    settled result and ``calls`` the ``model_called`` records of its log."""

    build: Callable[[Callable[[str], Reply]], PydanticAIHarness]
    prompt: str
    expected: Any
    calls: int
    check: Callable[[list[str]], None] | None = None


def model(reply_of: Callable[[str], Reply], name: str) -> FunctionModel:
    return FunctionModel(reply_of(name), model_name=name)


# --- covered -----------------------------------------------------------------------------


def validator_retry(reply_of: Callable[[str], Reply]) -> PydanticAIHarness:
    agent = Agent(model(reply_of, "writer"))

    @agent.output_validator
    def polished(output: str) -> str:
        if output == "draft":
            raise ModelRetry("polish it")
        return output

    return PydanticAIHarness(agent)


def retried(messages: list[pa.ModelMessage]) -> bool:
    """Whether this request follows a rejected answer (its feedback, in whatever part)."""
    return any(isinstance(m, pa.ModelResponse) for m in messages)


def writer(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    return pa.ModelResponse(parts=[pa.TextPart("polished" if retried(messages) else "draft")])


class Order(BaseModel):
    id: int
    status: str


def structured(reply_of: Callable[[str], Reply]) -> PydanticAIHarness:
    return PydanticAIHarness(Agent(model(reply_of, "clerk"), output_type=Order))


def clerk(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    args = {"id": 42, "status": "shipped"} if retried(messages) else {"id": "forty-two"}
    return pa.ModelResponse(parts=[pa.ToolCallPart(info.output_tools[0].name, args)])


def tool_failed(reply_of: Callable[[str], Reply]) -> PydanticAIHarness:
    agent = Agent(model(reply_of, "desk"))

    @agent.tool_plain
    def order(id: int) -> str:
        raise ToolFailed(f"no order {id}")

    return PydanticAIHarness(agent)


def desk(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    returned = [p for p in messages[-1].parts if isinstance(p, pa.ToolReturnPart)]
    if returned:
        return pa.ModelResponse(parts=[pa.TextPart(f"sorry: {returned[0].content}")])
    return pa.ModelResponse(parts=[pa.ToolCallPart("order", {"id": 7}, tool_call_id="c1")])


def checker_in_validator(reply_of: Callable[[str], Reply]) -> PydanticAIHarness:
    checker = journaled_agent(Agent(model(reply_of, "checker"), output_type=bool))
    agent = Agent(model(reply_of, "writer"))

    @agent.output_validator
    async def polite(output: str) -> str:
        if not (await checker.run(f"Is this polite? {output}")).output:
            raise ModelRetry("be polite")
        return output

    return PydanticAIHarness(agent)


def plain_checker_in_validator(reply_of: Callable[[str], Reply]) -> PydanticAIHarness:
    checker = Agent(model(reply_of, "checker"), output_type=bool)  # not wrapped
    agent = Agent(model(reply_of, "writer"))

    @agent.output_validator
    async def polite(output: str) -> str:
        if not (await checker.run(f"Is this polite? {output}")).output:
            raise ModelRetry("be polite")
        return output

    return PydanticAIHarness(agent)


def summarized_history(reply_of: Callable[[str], Reply]) -> PydanticAIHarness:
    summarizer = Agent(model(reply_of, "summarizer"))

    async def summarize(messages: list[pa.ModelMessage]) -> list[pa.ModelMessage]:
        summary = (await summarizer.run(f"summarize {len(messages)} messages")).output
        return [pa.ModelRequest(parts=[pa.UserPromptPart(summary)]), *messages[-1:]]

    writing = Agent(model(reply_of, "writer"), capabilities=[ProcessHistory(summarize)])
    return PydanticAIHarness(writing)


def summarizer(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    return pa.ModelResponse(parts=[pa.TextPart("a summary")])


def checker(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    prompt = next(p for p in messages[-1].parts if isinstance(p, pa.UserPromptPart))
    polite = str(prompt.content).endswith("polished")
    return pa.ModelResponse(
        parts=[pa.ToolCallPart(info.output_tools[0].name, {"response": polite})]
    )


def agent_in_tool(reply_of: Callable[[str], Reply]) -> PydanticAIHarness:
    researcher = Agent(model(reply_of, "researcher"))
    journaled = journaled_agent(Agent(model(reply_of, "researcher")))
    agent = Agent(model(reply_of, "desk"))

    @agent.tool_plain
    async def order(id: int) -> str:
        plain = (await researcher.run(f"order {id}")).output
        wrapped = (await journaled.run(f"order {id}")).output  # inert inside a tool
        return f"{plain} / {wrapped}"

    return PydanticAIHarness(agent)


def researcher(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    return pa.ModelResponse(parts=[pa.TextPart("in transit")])


class Counting(WrapperModel):
    """A model that counts its tokens (FunctionModel does not)."""

    async def count_tokens(self, *args: Any) -> RequestUsage:
        return RequestUsage(input_tokens=12)


def tokens_counted(reply_of: Callable[[str], Reply]) -> PydanticAIHarness:
    agent = Agent(Counting(model(reply_of, "writer")))

    async def limited(agent: JournaledAgent, prompt: str, history: Any) -> Any:
        limits = UsageLimits(input_tokens_limit=1000, count_tokens_before_request=True)
        return (await agent.run(prompt, usage_limits=limits)).output

    return PydanticAIHarness(agent, drive=limited)


def one_step(kinds: list[str]) -> None:
    assert kinds.count("step_recorded") == 1  # the count before the request, recorded


def two_results(kinds: list[str]) -> None:
    assert kinds.count("tool_outcome") == 1  # the sub-agents ran inside the one tool call


def replies(**by_name: Reply) -> Callable[[str], Reply]:
    return lambda name: by_name[name]


LIVE = replies(
    writer=writer,
    clerk=clerk,
    desk=desk,
    checker=checker,
    researcher=researcher,
    summarizer=summarizer,
)


def driven_by(drive: Drive) -> Callable[[Callable[[str], Reply]], PydanticAIHarness]:
    return lambda reply_of: PydanticAIHarness(Agent(model(reply_of, "writer")), drive=drive)


COVERED: dict[str, Case] = {
    **{
        f"the run driven by {name}": Case(driven_by(drive), "hi", "draft", 1)
        for name, drive in sorted(DRIVES.items())
    },
    "an output validator's ModelRetry asks the model again": Case(
        validator_retry, "write", "polished", 2
    ),
    "structured (tool) output retried after a validation error": Case(
        structured, "order", {"id": 42, "status": "shipped"}, 2
    ),
    "a tool raising pydantic-ai's ToolFailed, which the model reads": Case(
        tool_failed, "order 7", "sorry: no order 7", 2
    ),
    "a checker agent in an output validator, wrapped in journaled_agent": Case(
        checker_in_validator, "write", "polished", 4
    ),
    "a checker agent in an output validator, not wrapped": Case(
        plain_checker_in_validator, "write", "polished", 4
    ),
    "an agent run by a history processor (a summarizer)": Case(
        summarized_history, "write", "draft", 2
    ),
    "agents run inside a tool: part of the tool's recorded outcome": Case(
        agent_in_tool, "order 7", "sorry: in transit / in transit", 2, two_results
    ),
    "token counting before each request (count_tokens_before_request)": Case(
        tokens_counted, "write", "draft", 1, one_step
    ),
}


@pytest.mark.parametrize("construct", sorted(COVERED))
async def test_covered(construct: str, make_runtime: Make, store: Store) -> None:
    case = COVERED[construct]
    harness = case.build(LIVE)
    definition = durable(harness.agent, drive=harness.drive)
    async with make_runtime({"agent": definition}) as runtime:
        receipt = await runtime.dispatch("agent", "me", case.prompt)
        settled = await settle(runtime, receipt.submission_id)
        kinds = [r.kind for r in await runtime.records(receipt.conversation_id)]
    assert settled["result"] == case.expected, settled
    assert kinds.count("model_called") == case.calls
    if case.check is not None:
        case.check(kinds)
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(case.build(lambda name: refuse)) == [case.expected]


# --- refused -----------------------------------------------------------------------------


def plain_agent() -> Agent[None, str]:
    return Agent(FunctionModel(writer, model_name="writer"))


async def realtime(agent: JournaledAgent, prompt: str, history: Any) -> Any:
    async with agent.realtime("openai-realtime:gpt-realtime").session():
        raise AssertionError("a realtime session opened")


async def compaction(agent: JournaledAgent, prompt: str, history: Any) -> Any:
    from pydantic_ai.models.openai import OpenAICompaction

    compact = OpenAICompaction(message_count_threshold=1)
    responses = infer_model("openai-responses:gpt-4.1-mini")
    history = [pa.ModelRequest(parts=[pa.UserPromptPart("earlier")]), *history]
    return (
        await agent.run(prompt, message_history=history, model=responses, capabilities=[compact])
    ).output


async def plain_realtime(agent: JournaledAgent, prompt: str, history: Any) -> Any:
    async with plain_agent().realtime("openai-realtime:gpt-realtime").session():
        raise AssertionError("a realtime session opened")


REFUSED: dict[str, tuple[Callable[[JournaledAgent, str, Any], Awaitable[Any]], str]] = {
    "a realtime session (audio over a provider socket)": (realtime, "realtime sessions"),
    "provider-side compaction (OpenAICompaction, stateless)": (compaction, "compaction"),
    "a realtime session of another agent, inside the durable run": (
        plain_realtime,
        "realtime sessions",
    ),
}


@pytest.mark.parametrize("construct", sorted(REFUSED))
async def test_refused(construct: str, make_runtime: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "never-used")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens
    drive, says = REFUSED[construct]
    async with make_runtime({"agent": durable(plain_agent(), drive=drive)}) as runtime:
        receipt = await runtime.dispatch("agent", "me", "hi")
        settled = await settle(runtime, receipt.submission_id)
    assert settled["status"] == "failed", settled
    error = str(settled["error"])
    assert error.startswith(f"{NotJournaled.__name__}: ") and says in error, error


def test_refused_at_registration_an_agent_another_engine_makes_durable() -> None:
    from pydantic_ai.durable_exec import BaseDurabilityCapability

    class Engine(BaseDurabilityCapability[Any]):  # stands for Temporal, DBOS or Prefect
        @property
        def in_durable_context(self) -> bool:
            return False

        def get_durable_operation_backend(self) -> Any:
            raise NotImplementedError

    engine = object.__new__(Engine)  # its engine is never set up: only its kind matters
    agent = SimpleNamespace(root_capability=SimpleNamespace(apply=lambda visit: visit(engine)))
    with pytest.raises(UnsupportedConstruct, match="already made durable by another engine"):
        check_journalable(agent)  # type: ignore[arg-type]


async def test_refused_a_journaled_agent_or_model_outside_a_tether_run() -> None:
    with pytest.raises(NotInTurn):
        await journaled_agent(plain_agent()).run("hi")
    agent = plain_agent()
    with pytest.raises(NotInTurn):
        await agent.run("hi", model=JournaledModel(FunctionModel(writer, model_name="writer")))
