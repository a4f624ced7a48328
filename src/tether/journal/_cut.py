"""What a cut leaves open in a pending execution, and the records that close it.

A cut is where a log stops inside an execution: a crash, or a fork taken at a seq between a
call and its answer. Recovery re-drives what it can and closes the rest; a fork child
re-drives nothing (the parent's execution is not its own), so it closes everything.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.journal._deltas import interrupted_completion
from tether.journal._executions import Execution
from tether.messages import ToolOutcomeStatus
from tether.records import (
    AssistantMessageCompleted,
    AssistantMessageStarted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    Record,
    ToolCalled,
    ToolOutcome,
)

__all__ = ("FORK_CUT_OUTCOME", "fork_cut_outcome", "open_streams", "unanswered_calls")

FORK_CUT_OUTCOME = (
    "This tool call has no result in this session: the session was forked from another one "
    "between the call and its result, and the tool was not run here (it may have run in the "
    "original session)."
)


def open_streams(records: Sequence[Record], pending: Execution) -> list[AssistantMessageCompleted]:
    """An interrupted completion (not an effect) for each message that started streaming in
    ``pending`` and never completed, carrying what it streamed."""
    since = records[pending.start_index :]
    own = [record for record in since if record.execution_id == pending.id]
    completed = {  # by any writer: a fork's repair belongs to no execution
        record.payload.call_id
        for record in since
        if record.kind == AssistantMessageCompleted.KIND
        and isinstance(record.payload, AssistantMessageCompleted)
    }
    text: dict[str, dict[str, list[str]]] = {}
    for record in own:
        payload = record.payload
        if isinstance(payload, AssistantMessageStarted) and payload.call_id not in completed:
            text[payload.call_id] = {"text": [], "thinking": []}
        elif (
            isinstance(payload, AssistantTextDelta | AssistantThinkingDelta)
            and payload.call_id in text
        ):
            kind = "text" if isinstance(payload, AssistantTextDelta) else "thinking"
            text[payload.call_id][kind].append(payload.text)
    return [interrupted_completion(call_id, streamed) for call_id, streamed in text.items()]


def unanswered_calls(records: Sequence[Record], pending: Execution) -> list[str]:
    """The tool calls of ``pending`` without a result, in the order they were made: those the
    model asked for and those journaled as started. A model provider refuses a history in
    which a tool call has no result."""
    asked: dict[str, None] = {}
    answered: set[str] = set()
    for record in records[pending.start_index :]:
        kind = record.kind
        if kind == ToolOutcome.KIND:  # by any writer: a fork's repair belongs to no execution
            outcome = record.payload
            assert isinstance(outcome, ToolOutcome)
            answered.add(outcome.call_id)
        elif record.execution_id != pending.id:
            continue
        elif kind == AssistantMessageCompleted.KIND:
            completion = record.payload
            assert isinstance(completion, AssistantMessageCompleted)
            if not completion.interrupted:
                asked.update((part.call_id, None) for part in completion.message.tool_calls)
        elif kind == ToolCalled.KIND:
            called = record.payload
            assert isinstance(called, ToolCalled)
            asked[called.call_id] = None
    return [call_id for call_id in asked if call_id not in answered]


def fork_cut_outcome(call_id: str) -> ToolOutcome:
    """The result a fork gives a tool call its cut separated from its result."""
    return ToolOutcome(
        call_id=call_id,
        content=FORK_CUT_OUTCOME,
        is_error=True,
        status=ToolOutcomeStatus.UNKNOWN,
    )
