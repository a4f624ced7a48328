"""What a cut leaves open in a pending execution, and the records that close it.

A cut is where a log stops inside an execution: a crash, a fork taken at a seq between a
call and its answer, or a run that ended before its execution did (an abort, a timeout, a
failure, an exhausted budget). Recovery re-drives what it can and closes the rest; a fork
child re-drives nothing (the parent's execution is not its own), so it closes everything;
a run that ended closes everything with a result that says why, so that its session's next
execution hands its model a whole history: every provider refuses a tool call without its
result.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.journal._deltas import interrupted_completion
from tether.journal._executions import Execution
from tether.journal._outcomes import APPROVED_RUN
from tether.messages import Mediation, ToolOutcomeStatus
from tether.records import (
    AssistantMessageCompleted,
    AssistantMessageStarted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    Payload,
    Record,
    StepRecorded,
    ToolCalled,
    ToolOutcome,
)

__all__ = (
    "FORK_CUT_OUTCOME",
    "fork_cut_outcome",
    "loose_ends",
    "open_streams",
    "unanswered_calls",
)

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


def loose_ends(records: Sequence[Record], pending: Execution, why: str) -> list[Payload]:
    """What closes an execution that will never go on, because its run ended (``why``: how,
    e.g. ``"aborted"``): an interrupted completion for each message cut mid-stream, and a
    result for each tool call without one that tells the model what became of it.

    - a call the model asked for that never started: it did not run (an error);
    - a call that waited for a person (an approval, an input) and never went ahead: it did not
      run (``denied``, as a rejection reads); an approved call that is not idempotent went
      ahead once its run was marked (``APPROVED_RUN``), an idempotent one is safe to ask for
      again either way;
    - any other call that had started (its intent is durable): it may have acted, partly or
      wholly (``unknown``).
    """
    called: dict[str, ToolCalled] = {}
    went_ahead: set[str] = set()
    for record in records[pending.start_index :]:
        payload = record.payload
        if record.execution_id != pending.id:
            continue
        if isinstance(payload, ToolCalled):
            called[payload.call_id] = payload
        elif isinstance(payload, StepRecorded) and payload.name == APPROVED_RUN:
            went_ahead.add(payload.call_id)
    closing: list[Payload] = list(open_streams(records, pending))
    for call_id in unanswered_calls(records, pending):
        intent = called.get(call_id)
        closing.append(_ended_outcome(call_id, intent, call_id in went_ahead, why))
    return closing


def _ended_outcome(
    call_id: str, intent: ToolCalled | None, went_ahead: bool, why: str
) -> ToolOutcome:
    if intent is None:
        content, status = f"Tool execution did not run: {why}.", ToolOutcomeStatus.ERROR
    elif intent.mediation is Mediation.INPUT:
        content, status = f"No answer was given: {why}.", ToolOutcomeStatus.DENIED
    elif intent.mediation is Mediation.APPROVAL and not went_ahead:
        content, status = f"Tool execution did not run: {why}.", ToolOutcomeStatus.DENIED
    else:
        what = "The subagent's task" if intent.mediation is Mediation.TASK else "The tool call"
        content = (
            f"{what} was cut short before its result came ({why}): it may have taken effect, "
            "partly or wholly."
        )
        status = ToolOutcomeStatus.UNKNOWN
    return ToolOutcome(call_id=call_id, content=content, is_error=True, status=status)
