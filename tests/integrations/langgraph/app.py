"""A ReAct-style LangGraph agent on a scripted chat model (``tether serve --app`` imports it).

``TETHER_LG_CALLS`` names a file the model appends one line per call to, and
``TETHER_LG_TOOL_SECONDS`` slows the tool down, so a real-process test can kill the
server mid-tool and prove afterwards which model calls were made again.
"""

from __future__ import annotations

import asyncio
import operator
import os
from typing import Annotated, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt
from pydantic import Field

from tether.engine import AgentDefinition
from tether.integrations.langgraph import JournaledChatModel, durable

CALLS_ENV = "TETHER_LG_CALLS"
TOOL_SECONDS_ENV = "TETHER_LG_TOOL_SECONDS"
TOOL_RUNS: list[str] = []
"""Every real run of ``lookup`` in this process."""


class ScriptedChatModel(BaseChatModel):
    """Asks for ``lookup`` on the user's last message, then answers with what it returned.

    Tool call ids are ``call-<n>`` for the n-th user message, so a conversation never reuses
    one. Each call is counted (and logged to ``$TETHER_LG_CALLS`` when set).
    """

    calls: list[str] = Field(default_factory=list)
    usage: bool = True
    fan_out: int = 1
    """How many lookups one reply asks for (run in parallel by ToolNode)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, *, tool_choice: str | None = None, **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        asked = [m for m in messages if isinstance(m, HumanMessage)]
        last = messages[-1]
        if isinstance(last, ToolMessage):
            kind = "answer"
            tail = len(messages) - next(
                i for i, m in enumerate(reversed(messages)) if not isinstance(m, ToolMessage)
            )
            reply = AIMessage(
                content="answer: " + "; ".join(str(m.content) for m in messages[tail:])
            )
        else:
            kind = "lookup"
            topics = [str(last.content)] * self.fan_out
            calls = [
                {
                    "name": "lookup",
                    "args": {"topic": f"{topic}{'' if self.fan_out == 1 else f' #{i}'}"},
                    "id": f"call-{len(asked)}" + ("" if self.fan_out == 1 else f"-{i}"),
                }
                for i, topic in enumerate(topics)
            ]
            reply = AIMessage(content="", tool_calls=calls)
        if self.usage:
            reply.usage_metadata = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        line = f"{len(asked)}:{kind}"
        self.calls.append(line)
        if path := os.environ.get(CALLS_ENV):
            _append(path, line)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _append(path: str, line: str) -> None:
    with open(path, "a") as log:  # one short line: not worth a thread
        log.write(line + "\n")


class ExplodingChatModel(ScriptedChatModel):
    """Fails the test if it is ever asked (replays must make zero model calls)."""

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise AssertionError("the model was called")


@tool
async def lookup(topic: str) -> str:
    """Look a topic up."""
    await asyncio.sleep(float(os.environ.get(TOOL_SECONDS_ENV, "0")))
    TOOL_RUNS.append(topic)
    return f"facts about {topic}"


def build(
    model: JournaledChatModel, tools: list[BaseTool]
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A hand-written ReAct graph: agent → tools → agent, until no tool is asked for."""
    bound: Runnable[LanguageModelInput, BaseMessage] = model.bind_tools(tools)

    async def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


class EchoChatModel(ScriptedChatModel):
    """Answers ``echo: <the user's last message>``, asking for no tool."""

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        asked = [m for m in messages if isinstance(m, HumanMessage)]
        self.calls.append(f"{len(asked)}:echo")
        if path := os.environ.get(CALLS_ENV):
            _append(path, f"{len(asked)}:echo")
        reply = AIMessage(content=f"echo: {asked[-1].content}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class Counted(MessagesState):
    count: Annotated[int, operator.add]
    """Added to once per submission: a reducer applied twice to the restored value would show."""
    topics: list[str]
    """What each submission was about, in order (a plain last-value channel)."""


SEEN: list[tuple[int, list[str]]] = []
"""What the counting node found in the state, each time it ran in this process."""


def counter(
    model: JournaledChatModel, tools: list[BaseTool]
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """One node that answers, counts the submissions and lists their topics."""

    async def agent(state: Counted) -> dict[str, Any]:
        SEEN.append((state.get("count", 0), list(state.get("topics", []))))
        reply = await model.ainvoke(state["messages"])
        topic = str(state["messages"][-1].content)
        return {"messages": [reply], "count": 1, "topics": [*state.get("topics", []), topic]}

    graph = StateGraph(Counted)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile()


def counting(model: BaseChatModel | None = None) -> AgentDefinition:
    return durable(
        counter, model=model if model is not None else EchoChatModel(calls=[]), name="counter"
    )


VERDICT = {"type": "string", "enum": ["send", "rewrite"]}
"""The answer the first question of the review takes (an interrupt's ``response_schema``)."""


class Review(MessagesState):
    verdict: str
    note: str


def reviewer(
    model: JournaledChatModel, tools: list[BaseTool]
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """draft (the model) -> review (two questions for a person) -> send (the model again,
    told what the reviewer said)."""

    async def draft(state: Review) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    async def review(state: Review) -> dict[str, Any]:
        text = str(state["messages"][-1].content)
        verdict = interrupt(
            {"question": "Send this draft?", "draft": text}, response_schema=VERDICT
        )
        note = interrupt("Any note for the record?")
        return {"verdict": verdict, "note": note}

    async def send(state: Review) -> dict[str, Any]:
        told = HumanMessage(content=f"The reviewer says {state['verdict']}: {state['note']}")
        return {"messages": [await model.ainvoke([*state["messages"], told])]}

    graph = StateGraph(Review)
    graph.add_node("draft", draft)
    graph.add_node("review", review)
    graph.add_node("send", send)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "review")
    graph.add_edge("review", "send")
    graph.add_edge("send", END)
    return graph.compile()


MODEL = "gpt-4.1-mini"


def chat_openai(**options: Any) -> ChatOpenAI:
    """The real ChatOpenAI, on ``$OPENAI_BASE_URL`` (the fake OpenAI server in the tests);
    no SDK retries to wait out."""
    return ChatOpenAI(model=MODEL, max_retries=0, **options)


def reviewing(model: BaseChatModel | None = None) -> AgentDefinition:
    """The review graph on ChatOpenAI."""
    return durable(reviewer, model=model if model is not None else chat_openai(), name="review")


def review_agents() -> dict[str, AgentDefinition]:
    return {"review": reviewing()}


def react(model: BaseChatModel | None = None, **options: Any) -> AgentDefinition:
    return durable(
        build,
        model=model if model is not None else ScriptedChatModel(calls=[]),
        tools=[lookup],
        name="react",
        **options,
    )


def agents() -> dict[str, AgentDefinition]:
    return {"react": react(idempotent_tools={"lookup"})}


def counter_agents() -> dict[str, AgentDefinition]:
    return {"counter": counting()}
