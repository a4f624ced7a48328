"""Task calls in the canonical stream (issue 21): a spawned child and a finished one are
typed data events with the child's ids, agent and stream URL."""

from tether.messages import Mediation, Usage
from tether.records import (
    SettlementStatus,
    SubmissionSettled,
    TaskFinished,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
)
from tether.store import MemoryStore
from tether.stream import DataContent, StreamTaskMessageFull, ToolResponseContent, project

from .test_project import check_slots, log_of

SPAWNED = TaskSpawned(
    call_id="call-0",
    agent="researcher",
    instance="acme corp",
    session="task-1",
    child_conversation_id="c-2",
    child_submission_id="s-2",
)


def _data(event: object) -> dict[str, object]:
    assert isinstance(event, StreamTaskMessageFull)
    assert isinstance(event.content, DataContent) and event.content.author == "agent"
    return dict(event.content.data)


async def test_a_spawn_and_its_end_are_typed_events_with_the_childs_stream() -> None:
    store = MemoryStore()
    finished = TaskFinished(
        call_id="call-0",
        child_conversation_id="c-2",
        child_submission_id="s-2",
        status=SettlementStatus.FAILED,
        error="boom",
        error_code="run_failed",
        agent="researcher",
        usage=Usage(input_tokens=3, output_tokens=5),
        model_calls=1,
    )
    cid = await log_of(
        store,
        [
            ToolCalled(
                call_id="call-0",
                tool="task",
                args={"agent": "researcher", "prompt": "tides"},
                idempotency_key="k",
                mediation=Mediation.TASK,
            ),
            SPAWNED,
            ToolOutcome(call_id="call-0", content="The researcher task failed", is_error=True),
            finished,
            SubmissionSettled(status="succeeded", result="done"),
        ],
    )
    events = list(project(await store.read(cid)))
    check_slots(events)
    _, spawn, response, end, settled = events
    url = "/agents/researcher/acme%20corp?session=task-1"
    assert _data(spawn) == {
        "kind": "task_spawned",
        "callId": "call-0",
        "agent": "researcher",
        "instance": "acme corp",
        "session": "task-1",
        "childConversationId": "c-2",
        "childSubmissionId": "s-2",
        "streamUrl": url,
    }
    assert isinstance(response, StreamTaskMessageFull)
    assert isinstance(response.content, ToolResponseContent) and response.content.is_error
    assert _data(end) == {
        "kind": "task_finished",
        "callId": "call-0",
        "childConversationId": "c-2",
        "childSubmissionId": "s-2",
        "status": "failed",
        "error": "boom",
        "errorCode": "run_failed",
        "agent": "researcher",
        "usage": {"inputTokens": 3, "outputTokens": 5},
        "modelCalls": 1,
        "streamUrl": url,
    }
    # How the parent's own submission ended closes its stream (its result came as a message).
    assert _data(settled) == {"kind": "submission_settled", "status": "succeeded"}


async def test_an_end_without_its_spawn_has_no_stream_url() -> None:
    """A projection that starts after the spawn (a partial log) cannot link the child."""
    store = MemoryStore()
    finished = TaskFinished(
        call_id="call-0",
        child_conversation_id="c-2",
        child_submission_id="s-2",
        status=SettlementStatus.SUCCEEDED,
        result="notes",
    )
    cid = await log_of(store, [finished])
    [end] = project(await store.read(cid))
    assert "streamUrl" not in _data(end) and _data(end)["result"] == "notes"
