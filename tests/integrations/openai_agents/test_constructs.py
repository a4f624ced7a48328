"""What the durable adapter covers and what it refuses (issue 25 item 1), construct by construct.

A covered construct runs durably over the fake OpenAI API with the real SDK, every request it
sent journaled, and replays with 0 requests (the guardrails are in ``test_guardrails``, the
approvals in ``test_approvals``). A refused one raises :class:`UnsupportedConstruct` at
registration, naming the agent and the construct, before any request is sent.
"""

from collections.abc import Callable
from typing import Any

import pytest
from agents import (
    Agent,
    ApplyPatchTool,
    CodeInterpreterTool,
    ComputerTool,
    CustomTool,
    FileSearchTool,
    HostedMCPTool,
    LocalShellTool,
    RunConfig,
    Runner,
    ShellTool,
    SQLiteSession,
    ToolSearchTool,
    WebSearchTool,
    function_tool,
    handoff,
)
from agents.sandbox import SandboxAgent

from tether.engine import Runtime
from tether.integrations import durable_definition, turn_scope
from tether.integrations.openai_agents import UnsupportedConstruct, durable, journaled_agent
from tether.journal import Turn
from tether.store import Store

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from .over_http import MODEL, replay_sends_nothing, resume_from_every_cut, run_durably

Make = Callable[..., Runtime]


@function_tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def agent_with(*tools: Any) -> Agent[Any]:
    return Agent(name="helper", instructions="Help.", model=MODEL, tools=list(tools))


def with_handoff() -> Agent[Any]:
    expert = Agent(name="expert", instructions="Know things.", model=MODEL, tools=[lookup])
    return Agent(name="helper", instructions="Route.", model=MODEL, handoffs=[handoff(expert)])


def with_agent_as_tool() -> Agent[Any]:
    expert = Agent(name="expert", instructions="Know things.", model=MODEL)
    return agent_with(expert.as_tool(tool_name="ask_expert", tool_description="Ask an expert."))


def with_dynamic_instructions() -> Agent[Any]:
    """Instructions that ask a model: a run nested in the durable one, outside any tool."""

    async def instructions(ctx: Any, agent: Agent[Any]) -> str:
        writer = Agent(name="writer", instructions="Write a system prompt.", model=MODEL)
        return str((await Runner.run(writer, "a prompt for a helper")).final_output)

    return Agent(name="helper", instructions=instructions, model=MODEL)


HOSTED_MCP: Any = {
    "type": "mcp",
    "server_label": "docs",
    "server_url": "https://mcp.example.com",
    "require_approval": "never",
}

ASKS_FIRST: Any = {**HOSTED_MCP, "require_approval": "always"}

COVERED: dict[str, tuple[Callable[[], Agent[Any]], list[Answer], str, int]] = {
    # the agent, the answers in order, the result, the requests made inside tool calls
    "function tool": (
        lambda: agent_with(lookup),
        [Answer(calls=(Call("lookup", {"topic": "tides"}),)), Answer(text="Tides turn.")],
        "Tides turn.",
        0,
    ),
    "handoff (and the target's tools)": (
        with_handoff,
        [
            Answer(calls=(Call("transfer_to_expert"),)),
            Answer(calls=(Call("lookup", {"topic": "tides"}),)),
            Answer(text="Tides turn."),
        ],
        "Tides turn.",
        0,
    ),
    "agent as tool (one journaled tool call)": (
        with_agent_as_tool,
        [
            Answer(calls=(Call("ask_expert", {"input": "tides?"}),)),
            Answer(text="The moon."),
            Answer(text="The moon, says the expert."),
        ],
        "The moon, says the expert.",
        1,
    ),
    "dynamic instructions that run an agent": (
        with_dynamic_instructions,
        [Answer(text="Be brief."), Answer(text="Hi.")],
        "Hi.",
        0,
    ),
    "web search (hosted)": (
        lambda: agent_with(WebSearchTool()),
        [Answer(text="Found it.")],
        "Found it.",
        0,
    ),
    "file search (hosted)": (
        lambda: agent_with(FileSearchTool(vector_store_ids=["vs_1"])),
        [Answer(text="Found it.")],
        "Found it.",
        0,
    ),
    "code interpreter (hosted)": (
        lambda: agent_with(
            CodeInterpreterTool(tool_config={"type": "code_interpreter", "container": "cntr_1"})
        ),
        [Answer(text="42.")],
        "42.",
        0,
    ),
    "hosted MCP without approvals": (
        lambda: agent_with(HostedMCPTool(tool_config=HOSTED_MCP)),
        [Answer(text="Read the docs.")],
        "Read the docs.",
        0,
    ),
    "hosted shell": (
        lambda: agent_with(ShellTool(environment={"type": "container_auto"})),
        [Answer(text="Ran it.")],
        "Ran it.",
        0,
    ),
}


@pytest.mark.parametrize("construct", sorted(COVERED))
async def test_a_covered_construct_is_journaled_and_replays_with_no_request(
    construct: str, fake: FakeOpenAI, make_runtime: Make, store: Store
) -> None:
    make_agent, answers, expected, inside_tools = COVERED[construct]
    fake.add(*answers)
    run = await run_durably(make_runtime, make_agent, "hello")
    assert run.settled == {"status": "succeeded", "result": expected}
    assert fake.count == len(answers)
    assert run.count("model_called") == len(answers) - inside_tools
    assert await replay_sends_nothing(store, fake, run.conversation_id, make_agent) == [expected]
    if not inside_tools:  # an agent-as-tool's nested requests are its tool call's, not the log's
        journaled = answers[: len(answers) - inside_tools]
        await resume_from_every_cut(
            store, fake, run.conversation_id, expected, journaled, make_agent
        )


class Editor:
    def create_file(self, operation: Any) -> str:
        return "created"

    def update_file(self, operation: Any) -> str:
        return "updated"

    def delete_file(self, operation: Any) -> str:
        return "deleted"


class Computer:
    environment = "linux"
    dimensions = (800, 600)


async def custom(ctx: Any, text: str) -> str:
    return text


REFUSED: dict[str, tuple[Callable[[], Any], str]] = {
    # how the construct is registered, and what the error names
    "a local tool of a handoff's target": (
        lambda: durable(
            Agent(
                name="helper",
                handoffs=[Agent(name="docs", tools=[LocalShellTool(executor=lambda r: "ok")])],
            )
        ),
        "agent 'docs': tool 'local_shell'",
    ),
    "a local ShellTool": (
        lambda: durable(agent_with(ShellTool(executor=lambda request: "ok"))),
        "ShellTool",
    ),
    "LocalShellTool": (
        lambda: durable(agent_with(LocalShellTool(executor=lambda request: "ok"))),
        "LocalShellTool",
    ),
    "ComputerTool": (lambda: durable(agent_with(ComputerTool(computer=Computer()))), "Computer"),
    "ApplyPatchTool": (
        lambda: durable(agent_with(ApplyPatchTool(editor=Editor()))),
        "ApplyPatchTool",
    ),
    "CustomTool": (
        lambda: durable(
            agent_with(CustomTool(name="echo", description="Echo.", on_invoke_tool=custom))
        ),
        "CustomTool",
    ),
    "hosted MCP that asks for approval": (
        lambda: durable(agent_with(HostedMCPTool(tool_config=ASKS_FIRST))),
        "require_approval",
    ),
    "client-executed tool search": (
        lambda: durable(agent_with(ToolSearchTool(execution="client"))),
        "ToolSearchTool",
    ),
    "SandboxAgent": (lambda: durable(SandboxAgent(name="box")), "SandboxAgent"),
    "an SDK session": (
        lambda: durable(agent_with(), session=SQLiteSession("s1")),
        "session=",
    ),
}


@pytest.mark.parametrize("construct", sorted(REFUSED))
def test_a_construct_that_cannot_be_journaled_is_refused_at_registration(construct: str) -> None:
    register, named = REFUSED[construct]
    with pytest.raises(UnsupportedConstruct, match=named):
        register()


class CustomHarness:
    """A harness of one's own that runs the journaled clone with options of its choosing."""

    name, version = "agent", "1"

    def __init__(self, **options: Any) -> None:
        self.options = options

    async def run(self, turn: Turn) -> Any:
        clone = journaled_agent(agent_with())
        with turn_scope(turn):
            config = RunConfig(tracing_disabled=True)
            result = await Runner.run(clone, "hi", run_config=config, **self.options)
        return result.final_output


@pytest.mark.parametrize(
    "options",
    [
        {"session": SQLiteSession("s2")},
        {"previous_response_id": "resp_1"},
        {"conversation_id": "conv_1"},
    ],
    ids=lambda options: next(iter(options)),
)
async def test_a_journaled_run_refuses_state_the_log_does_not_hold(
    options: dict[str, Any], fake: FakeOpenAI, make_runtime: Make
) -> None:
    async with make_runtime({"agent": durable_definition(CustomHarness(**options))}) as runtime:
        receipt = await runtime.dispatch("agent", "me", "hi")
        settled = await settle(runtime, receipt.submission_id)
    assert settled["status"] == "failed"
    assert "UnsupportedConstruct" in str(settled) and fake.count == 0


async def test_a_nested_run_of_an_unsupported_agent_fails_loudly(
    fake: FakeOpenAI, make_runtime: Make
) -> None:
    async def instructions(ctx: Any, agent: Agent[Any]) -> str:
        docs = Agent(name="docs", model=MODEL, tools=[LocalShellTool(executor=lambda r: "ok")])
        return str((await Runner.run(docs, "a prompt")).final_output)

    run = await run_durably(
        make_runtime, lambda: Agent(name="helper", instructions=instructions, model=MODEL), "hi"
    )
    assert run.settled["status"] == "failed"
    assert "agent 'docs': tool 'local_shell'" in str(run.settled) and fake.count == 0
