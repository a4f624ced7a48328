"""Executions as the log records them: grouped by execution id, validated, classified.

An execution is every record carrying its id, in log order: ``execution_started``,
its inputs, its effects, and ``execution_ended`` once the harness returned. Deltas,
interrupted completions and ``execution_failed`` are audit only, never effects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tether.errors import IncompleteInvocation, InvalidExecutionLog
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    ConversationCreated,
    ExecutionEnded,
    ExecutionStarted,
    ModelCalled,
    Record,
    Signal,
    SteerReceived,
    StepRecorded,
    ToolCalled,
    ToolOutcome,
    UserMessage,
)

__all__ = ("EFFECT_KINDS", "INPUT_KINDS", "Execution", "fork_seq", "project")

INPUT_KINDS = frozenset({UserMessage.KIND, Signal.KIND})
EFFECT_KINDS = frozenset(
    {
        ModelCalled.KIND,
        AssistantMessageCompleted.KIND,
        ToolCalled.KIND,
        ApprovalRequested.KIND,
        ApprovalDecided.KIND,
        ToolOutcome.KIND,
        StepRecorded.KIND,
        SteerReceived.KIND,
    }
)


@dataclass
class Execution:
    """One execution's records. ``start_index`` is the start record's index in the log."""

    id: str
    start: Record
    start_index: int
    inputs: list[Record] = field(default_factory=list)
    effects: list[Record] = field(default_factory=list)
    end: Record | None = None

    @property
    def started(self) -> ExecutionStarted:
        payload = self.start.payload
        assert isinstance(payload, ExecutionStarted)
        return payload

    @property
    def completed(self) -> bool:
        return self.end is not None

    @property
    def output(self) -> object:
        if self.end is None:
            return None
        payload = self.end.payload
        assert isinstance(payload, ExecutionEnded)
        return payload.output

    def check_inputs(self) -> None:
        """The declared input count must match; a pending execution may not be short."""
        declared, found = self.started.input_count, len(self.inputs)
        if found == declared:
            return
        message = f"execution {self.id} declared {declared} inputs and recorded {found}"
        if found < declared and not self.completed:
            raise IncompleteInvocation(message)
        raise InvalidExecutionLog(message)


def _is_interrupted(record: Record) -> bool:
    payload = record.payload
    return isinstance(payload, AssistantMessageCompleted) and bool(payload.interrupted)


def project(records: Sequence[Record]) -> list[Execution]:
    """The executions of a log in first-seen order. Raises ``InvalidExecutionLog``."""
    executions: dict[str, Execution] = {}
    for index, record in enumerate(records):
        execution_id = record.execution_id
        if execution_id is None:
            continue
        execution = executions.get(execution_id)
        kind = record.kind
        if execution is None:
            if kind != ExecutionStarted.KIND:
                raise InvalidExecutionLog(
                    f"seq {record.seq} ({kind}) precedes the start of execution {execution_id}"
                )
            executions[execution_id] = Execution(execution_id, record, index)
            continue
        if kind == ExecutionStarted.KIND:
            raise InvalidExecutionLog(f"seq {record.seq}: execution {execution_id} starts twice")
        if execution.end is not None and kind != ApprovalDecided.KIND:
            raise InvalidExecutionLog(
                f"seq {record.seq} ({kind}) follows the end of {execution_id}"
            )
        if kind in INPUT_KINDS:
            if execution.effects:
                raise InvalidExecutionLog(f"seq {record.seq}: an input follows an effect")
            execution.inputs.append(record)
        elif kind == ExecutionEnded.KIND:
            execution.end = record
        elif kind in EFFECT_KINDS and not _is_interrupted(record):
            execution.effects.append(record)
    return list(executions.values())


def fork_seq(records: Sequence[Record]) -> int:
    """The seq of the fork marker (the child's ``conversation_created``), or 0 if none.

    Records before it were copied from the parent; their unresolved effects are not the
    child's to resume or decide.
    """
    marker = 0
    for record in records:
        if record.kind == ConversationCreated.KIND:
            payload = record.payload
            assert isinstance(payload, ConversationCreated)
            if payload.parent is not None and payload.parent.reason == "fork":
                marker = record.seq
    return marker
