"""Executions as the log records them: grouped by execution id, validated, classified.

An execution is every record carrying its id, in log order: ``execution_started``,
its inputs, its effects, and ``execution_ended`` once the harness returned. Deltas,
interrupted completions and ``execution_failed`` are audit only, never effects. A
``version_changed`` record is kept with the effects, where it says at which seq the code
changed, though it is none: replay and resume neither serve it nor require it consumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tether.errors import IncompleteInvocation, InvalidExecutionLog
from tether.journal._unread import is_unread
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    Compaction,
    ConversationCreated,
    ExecutionEnded,
    ExecutionStarted,
    InputAnswered,
    InputRequested,
    ModelCalled,
    PatchMarked,
    Record,
    Signal,
    SteerReceived,
    StepRecorded,
    TaskFinished,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
    UserMessage,
    VersionChanged,
)

__all__ = (
    "EFFECT_KINDS",
    "INPUT_KINDS",
    "Execution",
    "ExecutionRow",
    "Executions",
    "execution_rows",
    "executions_from_rows",
    "fork_seq",
    "is_fork_marker",
    "project",
)

INPUT_KINDS = frozenset({UserMessage.KIND, Signal.KIND})
_LATE_DECISIONS = frozenset({ApprovalDecided.KIND, InputAnswered.KIND})
"""A person's decision may land after its execution ended (it lost a race with the end)."""
EFFECT_KINDS = frozenset(
    {
        ModelCalled.KIND,
        AssistantMessageCompleted.KIND,
        ToolCalled.KIND,
        ApprovalRequested.KIND,
        ApprovalDecided.KIND,
        InputRequested.KIND,
        InputAnswered.KIND,
        ToolOutcome.KIND,
        StepRecorded.KIND,
        SteerReceived.KIND,
        Compaction.KIND,
        TaskSpawned.KIND,
        TaskFinished.KIND,
        PatchMarked.KIND,
        VersionChanged.KIND,
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
    def version(self) -> str | None:
        """The agent version the execution last ran under: the one its start recorded, or
        the one its latest ``version_changed`` moved it to (``None`` before versions)."""
        version = self.started.version
        for record in self.effects:
            if isinstance(record.payload, VersionChanged):
                version = record.payload.to_version
        return version

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
    assert isinstance(payload, AssistantMessageCompleted)
    return bool(payload.interrupted)


class Executions:
    """The executions of a log, projected one record at a time. Raises ``InvalidExecutionLog``."""

    def __init__(self) -> None:
        self.by_id: dict[str, Execution] = {}  # first-seen order
        self.by_submission: dict[str, list[Execution]] = {}
        self.count = 0  # records seen

    @property
    def latest(self) -> Execution | None:
        return next(reversed(self.by_id.values()), None)

    def add(self, record: Record) -> None:
        index, self.count = self.count, self.count + 1
        execution_id = record.execution_id
        if execution_id is None:
            return
        execution = self.by_id.get(execution_id)
        kind = record.kind
        if execution is None:
            if kind != ExecutionStarted.KIND:
                raise InvalidExecutionLog(
                    f"seq {record.seq} ({kind}) precedes the start of execution {execution_id}"
                )
            execution = Execution(execution_id, record, index)
            self.by_id[execution_id] = execution
            submission_id = record.submission_id
            if submission_id is not None:
                self.by_submission.setdefault(submission_id, []).append(execution)
            return
        if kind == ExecutionStarted.KIND:
            raise InvalidExecutionLog(f"seq {record.seq}: execution {execution_id} starts twice")
        if execution.end is not None and kind not in _LATE_DECISIONS:
            raise InvalidExecutionLog(
                f"seq {record.seq} ({kind}) follows the end of {execution_id}"
            )
        if kind in INPUT_KINDS:
            if execution.effects:
                raise InvalidExecutionLog(f"seq {record.seq}: an input follows an effect")
            execution.inputs.append(record)
        elif kind == ExecutionEnded.KIND:
            execution.end = record
        elif kind in EFFECT_KINDS and not (
            kind == AssistantMessageCompleted.KIND and _is_interrupted(record)
        ):
            execution.effects.append(record)


ExecutionRow = tuple[str, str | None, int, list[int], list[int], int]
"""An execution in a snapshot: id, submission id, and the log indexes of its start, inputs,
effects and end (-1 while it has none)."""


def execution_rows(executions: Executions) -> list[ExecutionRow]:
    return [
        (
            execution.id,
            execution.start.submission_id,
            execution.start_index,
            [record.seq - 1 for record in execution.inputs],
            [record.seq - 1 for record in execution.effects],
            -1 if execution.end is None else execution.end.seq - 1,
        )
        for execution in executions.by_id.values()
    ]


def executions_from_rows(records: Sequence[Record], rows: Sequence[ExecutionRow]) -> Executions:
    """The executions of ``records`` as :func:`execution_rows` described them; ``ValueError``
    (or ``IndexError``) if a row does not fit the log."""
    executions = Executions()
    for execution_id, submission_id, start, inputs, effects, end in rows:
        start_record = records[start]
        if not is_unread(start_record) and start_record.kind != ExecutionStarted.KIND:
            raise ValueError(f"snapshot execution {execution_id} does not start at a start")
        execution = Execution(
            execution_id,
            start_record,
            start,
            [records[index] for index in inputs],
            [records[index] for index in effects],
            None if end < 0 else records[end],
        )
        executions.by_id[execution_id] = execution
        if submission_id is not None:
            executions.by_submission.setdefault(submission_id, []).append(execution)
    executions.count = len(records)
    return executions


def project(records: Sequence[Record]) -> list[Execution]:
    """The executions of a log in first-seen order. Raises ``InvalidExecutionLog``."""
    executions = Executions()
    for record in records:
        executions.add(record)
    return list(executions.by_id.values())


def is_fork_marker(record: Record) -> bool:
    """A fork child's ``conversation_created``: the records before it came from the parent."""
    if record.kind != ConversationCreated.KIND:
        return False
    payload = record.payload
    assert isinstance(payload, ConversationCreated)
    return payload.parent is not None and payload.parent.reason == "fork"


def fork_seq(records: Sequence[Record]) -> int:
    """The seq of the fork marker, or 0 if none. Unresolved effects before it are the
    parent's: the child may not resume or decide them."""
    return max((record.seq for record in records if is_fork_marker(record)), default=0)
