"""Projection of records into the canonical stream."""

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from tether.demo import demo_agents
from tether.messages import Mediation, Message, TextPart, ThinkingPart, ToolCallPart
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    AssistantMessageStarted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    ExecutionEnded,
    PatchMarked,
    Payload,
    RecordDraft,
    SubmissionSettled,
    ToolCalled,
    ToolOutcome,
    UserMessage,
    VersionChanged,
)
from tether.store import MemoryStore, SessionKey, Store
from tether.stream import (
    DataContent,
    ReasoningContent,
    ReasoningContentDelta,
    StreamEvent,
    StreamProjector,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolResponseContent,
    project,
)

Make = Callable[..., Any]


async def log_of(store: Store, payloads: Sequence[Payload]) -> str:
    conversation, _ = await store.ensure_conversation(
        SessionKey("a", "i"), conversation_id="c-1", created_at=datetime.now(UTC)
    )
    drafts = [RecordDraft(p) for p in payloads]
    await store.append(conversation.id, drafts, expected_seq=1, fence=0)
    return conversation.id


def check_slots(events: Sequence[StreamEvent]) -> dict[int, list[StreamEvent]]:
    """Every Start/Full takes a fresh index; deltas and Done only touch an open slot."""
    slots: dict[int, list[StreamEvent]] = {}
    open_slots: set[int] = set()
    for event in events:
        assert event.index is not None
        if isinstance(event, StreamTaskMessageStart | StreamTaskMessageFull):
            assert event.index not in slots, f"index {event.index} reused"
            slots[event.index] = [event]
            if isinstance(event, StreamTaskMessageStart):
                open_slots.add(event.index)
        else:
            assert event.index in open_slots, f"{event.type} on a closed slot {event.index}"
            slots[event.index].append(event)
            if isinstance(event, StreamTaskMessageDone):
                open_slots.discard(event.index)
    assert not open_slots, f"slots left open: {open_slots}"
    return slots


def streamed_text(slot: list[StreamEvent]) -> str:
    return "".join(
        e.delta.text_delta or ""
        for e in slot
        if isinstance(e, StreamTaskMessageDelta) and isinstance(e.delta, TextDelta)
    )


async def test_a_turn_projects_to_slots_in_order() -> None:
    store = MemoryStore()
    answer = Message(
        role="assistant",
        parts=(
            ThinkingPart(text="let me see"),
            TextPart(text="Checking."),
            ToolCallPart(call_id="t1", name="clock"),
        ),
    )
    cid = await log_of(
        store,
        [
            UserMessage(body="what time is it?"),
            AssistantMessageStarted(call_id="m1"),
            AssistantThinkingDelta(call_id="m1", text="let me "),
            AssistantThinkingDelta(call_id="m1", text="see"),
            AssistantTextDelta(call_id="m1", text="Check"),
            AssistantTextDelta(call_id="m1", text="ing."),
            AssistantMessageCompleted(call_id="m1", message=answer),
            ToolCalled(
                call_id="t1", tool="clock", args={}, idempotency_key="k", mediation=Mediation.HOST
            ),
            ToolOutcome(call_id="t1", content="boom", is_error=True),
            AssistantMessageStarted(call_id="m2"),
            AssistantMessageCompleted(call_id="m2", message=Message.assistant("It is noon.")),
            ExecutionEnded(output="It is noon."),
            SubmissionSettled(status="succeeded", result="It is noon."),
        ],
    )
    events = list(project(await store.read(cid)))
    slots = check_slots(events)
    assert [e.index for e in events if e.type in ("start", "full")] == list(range(len(slots)))
    user, reasoning, text, request, response, final = (slots[i] for i in range(6))
    assert user == [
        StreamTaskMessageFull(
            content=TextContent(author="user", content="what time is it?"), index=0
        )
    ]
    assert isinstance(reasoning[0].content, ReasoningContent)  # type: ignore[union-attr]
    thought = [
        e.delta.content_delta
        for e in reasoning
        if isinstance(e, StreamTaskMessageDelta) and isinstance(e.delta, ReasoningContentDelta)
    ]
    assert thought == ["let me ", "see"]
    assert streamed_text(text) == "Checking." and text[-1].type == "done"
    assert isinstance(request[0].content, ToolRequestContent)  # type: ignore[union-attr]
    response_content = response[0].content  # type: ignore[union-attr]
    assert isinstance(response_content, ToolResponseContent)
    assert response_content.is_error is True and response_content.name == "clock"
    final_content = final[0].content  # type: ignore[union-attr]
    assert isinstance(final_content, TextContent) and final_content.content == "It is noon."


async def test_interrupted_and_summary_completions_add_nothing_whole() -> None:
    store = MemoryStore()
    cid = await log_of(
        store,
        [
            AssistantTextDelta(call_id="m1", text="half"),
            AssistantMessageCompleted(
                call_id="m1", message=Message.assistant("half"), interrupted=True
            ),
            AssistantMessageCompleted(
                call_id="s1", message=Message.assistant("summary"), purpose="summary"
            ),
        ],
    )
    events = list(project(await store.read(cid)))
    assert [e.type for e in events] == ["start", "delta", "done"]


async def test_approvals_are_data_messages() -> None:
    store = MemoryStore()
    cid = await log_of(
        store,
        [
            ApprovalRequested(
                approval_id="c-1.5", call_id="t", tool="send_email", args={}, args_digest="d"
            ),
            ApprovalDecided(approval_id="c-1.5", call_id="t", decision="approve", approver="ann"),
        ],
    )
    requested, decided = (e.content for e in project(await store.read(cid)))  # type: ignore[union-attr]
    assert isinstance(requested, DataContent) and requested.data["kind"] == "approval_requested"
    assert isinstance(decided, DataContent) and decided.author == "user"
    assert decided.data["approver"] == "ann"


async def test_a_version_change_is_a_data_message_and_a_patch_mark_is_none() -> None:
    store = MemoryStore()
    change = VersionChanged(
        from_version="v1", to_version="v2", reason="upgrade", differs=("system prompt",)
    )
    cid = await log_of(store, [change, PatchMarked(patch_id="p")])
    [event] = project(await store.read(cid))
    assert isinstance(event, StreamTaskMessageFull) and isinstance(event.content, DataContent)
    assert event.content.author == "agent"
    assert event.content.data == {
        "kind": "version_changed",
        "fromVersion": "v1",
        "toVersion": "v2",
        "reason": "upgrade",
        "differs": ["system prompt"],
    }


async def test_feeding_record_by_record_equals_projecting_the_log(
    make_runtime: Make, store: Store
) -> None:
    async with make_runtime(demo_agents()) as runtime:
        for text in ("hello", "research tides", "what time is it?"):
            receipt = await runtime.dispatch("assistant", "me", text)
            async with asyncio.timeout(60):
                settled = await runtime.wait(receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    whole = list(project(records))
    projector = StreamProjector()
    assert [e for r in records for e in projector.feed(r)] == whole
    slots = check_slots(whole)
    last_text = [s for s in slots.values() if isinstance(s[0].content, TextContent)][-1]  # type: ignore[union-attr]
    assert streamed_text(last_text) == settled["result"]
