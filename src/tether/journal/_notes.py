"""Notes: values a harness keeps in the log for its next execution (a graph's state, say).

``Turn.note`` journals a value the harness computed itself. Nothing outside the journal acts
on it, so it takes no commit of its own: it rides with the turn's next write, normally the
execution's end, and is the execution's last effect. ``Turn.last_note`` reads it back in a
later execution.
"""

from __future__ import annotations

from tether.errors import JournalError
from tether.journal._executions import Execution
from tether.journal._log import JournalLog
from tether.journal._unread import is_unread
from tether.records import ApprovalDecided, InputAnswered, Record, StepRecorded, VersionChanged

__all__ = ("MISSING", "STREAM_DATA", "last_note")

STREAM_DATA = "tether.stream.data"
"""The name of a note the canonical stream shows as a data event (``Full(DataContent)``, its
value, a JSON object with a ``kind``, as the data): what a harness streams beside its
messages, such as a LangGraph graph's updates and custom events. Like any note it rides with
the turn's next write, and replay compares it."""

_LATE = frozenset({ApprovalDecided.KIND, InputAnswered.KIND, VersionChanged.KIND})
"""What a person's decision (or an operator's move to another version) adds to an
execution after its last own effect."""
MISSING = object()
"""What ``last_note`` gives when no earlier execution noted the name."""


async def last_note(log: JournalLog, execution_id: str, name: str) -> object:
    """The value the latest earlier execution noted under ``name`` (``MISSING`` if none).

    Executions are asked latest first. One that completed answers: its note, or none if its
    last effect is something else. One that never completed (parked and then abandoned, or
    cut by a fork) answers only if its note made it into the log; else the one before it is
    asked. A fork's copied executions are asked as the log's own.
    """
    view = log.view
    if view is None:
        raise JournalError("reading a note needs a journal that keeps a view of its log")
    executions = view.executions
    current = executions.by_id.get(execution_id)
    before = current.start_index if current is not None else len(view.records)
    for execution in reversed(executions.by_id.values()):
        if execution.start_index >= before:
            continue
        value = await _note_of(log, execution, name)
        if value is not MISSING or execution.completed:
            return value
    return MISSING


async def _note_of(log: JournalLog, execution: Execution, name: str) -> object:
    for record in reversed(execution.effects):
        if is_unread(record):
            record = await _read(log, record.seq)
        if record.kind in _LATE:
            continue
        payload = record.payload
        if isinstance(payload, StepRecorded) and not payload.call_id and payload.name == name:
            return payload.value
        return MISSING  # a note is its execution's last effect
    return MISSING


async def _read(log: JournalLog, seq: int) -> Record:
    [record] = await log.store.read(log.conversation_id, after_seq=seq - 1, limit=1)
    return record
