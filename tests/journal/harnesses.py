"""Harnesses and helpers shared by the journal tests."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import JsonValue

from tether.journal import Journal, Turn
from tether.messages import Mediation, Message, ModelRequest, ModelResponse, ToolCall, ToolSpec
from tether.models import Model, ScriptedModel
from tether.records import UserMessage
from tether.store import SessionKey, Store
from tether.testing import RecordingTools, tool_call_response

TOOLS = {
    "lookup": ToolSpec(name="lookup", idempotent=True),
    "charge": ToolSpec(name="charge"),
    "send_email": ToolSpec(name="send_email", mediation=Mediation.APPROVAL),
}


class EchoHarness:
    """One model call on history + inputs; returns the answer text."""

    name = "echo"
    version = "1"

    async def run(self, turn: Turn) -> JsonValue:
        request = ModelRequest(model="test", messages=(*turn.history, *turn.inputs))
        return (await turn.model(request)).message.text


class LoopHarness:
    """A small agent loop: call the model, run the tools it asks for, until it answers."""

    name = "loop"
    version = "1"

    async def run(self, turn: Turn) -> JsonValue:
        messages = [*turn.history, *turn.inputs]
        for _ in range(8):
            messages += await turn.steering()
            request = ModelRequest(
                model="test", messages=tuple(messages), tools=tuple(TOOLS.values())
            )
            response = await turn.model(request)
            messages.append(response.message)
            if not response.message.tool_calls:
                return response.message.text
            for part in response.message.tool_calls:
                spec = TOOLS[part.name]
                result = await turn.tool(
                    ToolCall(
                        call_id=part.call_id,
                        name=part.name,
                        args=part.args,
                        idempotency_key=f"{turn.execution_id}:{part.call_id}",
                        mediation=spec.mediation,
                        idempotent=spec.idempotent,
                    )
                )
                messages.append(Message(role="tool", parts=(result.to_part(part.name),)))
        raise RuntimeError("too many rounds")


def planner(request: ModelRequest) -> ModelResponse | str:
    """Deterministic: asks for every tool named in the last user text, then sums up."""
    last = request.messages[-1]
    if last.role == "tool":
        results = [m.parts[0].content for m in request.messages if m.role == "tool"]  # type: ignore[union-attr]
        return f"done after {len(results)} tool results"
    text = last.text
    wanted = [name for name in TOOLS if name in text]
    if wanted:
        round_ = len(request.messages)
        args: dict[str, JsonValue] = {"q": text}
        return tool_call_response(
            *((f"call-{round_}-{i}", name, args) for i, name in enumerate(wanted))
        )
    return f"echo: {text}"


def planning_model(*, chunk: int | None = None) -> ScriptedModel:
    return ScriptedModel(planner, chunk=chunk)


async def new_conversation(store: Store, session: str = "default") -> str:
    conversation, _ = await store.ensure_conversation(
        SessionKey("agent", "inst", session),
        conversation_id=f"conv-{session}",
        created_at=datetime.now(UTC),
    )
    return conversation.id


async def journal(
    store: Store,
    conversation_id: str,
    *,
    model: Model | None = None,
    tools: RecordingTools | None = None,
) -> Journal:
    return await Journal.open(store, conversation_id, model=model, tools=tools)


def user(text: str) -> UserMessage:
    return UserMessage(body=text)
