"""Cross-channel conformance (reference §2.7): for each framework tap, ``yield_turn`` and
``auto_send_turn`` deliver logically equal content and identical span signals.

What ``auto_send_turn`` delivers is what lands in the log, read back as the canonical stream
(the SSE ``view=stream`` projection). Deliveries are normalized to (content type, identity,
payload); a Full equals a Start + Deltas + Done with the same content.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from agents import RunConfig, Runner
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.integrations.langgraph import LangGraphTurn
from tether.integrations.openai_agents import OpenAIAgentsTurn
from tether.integrations.pydantic_ai import PydanticAITurn
from tether.journal import Turn
from tether.store import Store
from tether.stream import (
    DataContent,
    HarnessTurn,
    MessageContent,
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    SpanSignal,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolRequestDelta,
    ToolResponseContent,
    UnifiedEmitter,
    project,
)

from ..engine.test_runtime import settle
from .langgraph.test_langgraph_sync import agent_graph, calling
from .openai_agents.test_tap import agent as weather_agent
from .pydantic_ai.test_tap import adding_agent

Delivery = tuple[str, str, str]


def pydantic_ai_turn() -> HarnessTurn:
    return PydanticAITurn(adding_agent().run_stream_events("add 1 and 2"), model="streamer")


def langgraph_turn() -> HarnessTurn:
    model = FakeMessagesListChatModel(
        responses=[calling(("c1", "add", {"a": 1, "b": 2})), AIMessage(content="it is 3")]
    )
    graph = agent_graph(model)
    return LangGraphTurn(
        graph.astream({"messages": [HumanMessage("1+2?")]}, stream_mode=["messages", "updates"])
    )


def openai_agents_turn() -> HarnessTurn:
    run = Runner.run_streamed(
        weather_agent(), "weather", run_config=RunConfig(tracing_disabled=True)
    )
    return OpenAIAgentsTurn(run, model="scripted")


TURNS: dict[str, Callable[[], HarnessTurn]] = {
    "pydantic-ai": pydantic_ai_turn,
    "langgraph": langgraph_turn,
    "openai-agents": openai_agents_turn,
}


@dataclass
class Slot:
    content: MessageContent
    streamed: str = ""


def normalize(events: list[StreamEvent]) -> list[Delivery]:
    """Each delivered message as (type, identity, payload), in order of first appearance."""
    slots: dict[int, Slot] = {}
    order: list[Slot] = []
    for event in events:
        if isinstance(event, StreamTaskMessageStart | StreamTaskMessageFull):
            content = event.content
            if isinstance(content, TextContent) and content.author == "user":
                continue  # the input, which only the log carries
            if (
                isinstance(content, DataContent)
                and content.data.get("kind") == "submission_settled"
            ):
                continue  # how the submission ended: the log's too, not the turn's
            slot = Slot(content)
            order.append(slot)
            if isinstance(event, StreamTaskMessageStart) and event.index is not None:
                slots[event.index] = slot
        elif isinstance(event, StreamTaskMessageDelta) and event.index in slots:
            slots[event.index].streamed += _chunk(event)
    return [delivery for slot in order if (delivery := _delivery(slot.content, slot.streamed))]


def _chunk(event: StreamTaskMessageDelta) -> str:
    delta = event.delta
    if isinstance(delta, TextDelta):
        return delta.text_delta or ""
    if isinstance(delta, ReasoningContentDelta):
        return delta.content_delta or ""
    if isinstance(delta, ReasoningSummaryDelta):
        return delta.summary_delta or ""
    if isinstance(delta, ToolRequestDelta):
        return delta.arguments_delta or ""
    return ""


def _delivery(content: MessageContent, extra: str) -> Delivery | None:
    if isinstance(content, TextContent):
        text = content.content + extra
        return ("text", "", text) if text else None
    if isinstance(content, ReasoningContent):
        return ("reasoning", "", "".join([*content.summary, *(content.content or ()), extra]))
    if isinstance(content, ToolRequestContent):
        arguments = json.loads(extra) if extra else content.arguments
        return ("tool_request", content.tool_call_id, json.dumps(arguments, sort_keys=True))
    if isinstance(content, ToolResponseContent):
        value = content.content
        return (
            "tool_response",
            content.tool_call_id,
            value if isinstance(value, str) else json.dumps(value),
        )
    return ("data", "", json.dumps(content.data, sort_keys=True))


class AutoSender:
    name, version = "auto-send", "1"

    def __init__(self, make: Callable[[], HarnessTurn], tracer: Callable[[SpanSignal], None]):
        self.make = make
        self.emitter = UnifiedEmitter(tracer=tracer)

    async def run(self, turn: Turn) -> JsonValue:
        return (await self.emitter.auto_send_turn(self.make(), turn)).final_text


@pytest.mark.parametrize("framework", sorted(TURNS))
async def test_yield_and_auto_send_deliver_the_same_turn(
    framework: str, make_runtime: Callable[..., Runtime], store: Store
) -> None:
    make = TURNS[framework]
    yielded_spans: list[SpanSignal] = []
    yielded = [e async for e in UnifiedEmitter(tracer=yielded_spans.append).yield_turn(make())]

    sent_spans: list[SpanSignal] = []
    sender = AutoSender(make, sent_spans.append)
    agents = {"tap": AgentDefinition(lambda i, e: AgentSpec(harness=sender), max_attempts=1)}
    async with make_runtime(agents) as runtime:
        receipt = await runtime.dispatch("tap", "me", "go")
        settled = await settle(runtime, receipt.submission_id)
    assert settled["status"] == "succeeded", settled
    logged = list(project(await store.read(receipt.conversation_id)))

    deliveries = normalize(yielded)
    assert {kind for kind, _, _ in deliveries} >= {"text", "tool_request", "tool_response"}
    assert normalize(logged) == deliveries
    assert sent_spans == yielded_spans and yielded_spans
