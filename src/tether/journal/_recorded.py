"""An execution's recorded effects, indexed for serving them back in replay and resume.

Intents (model calls, tool calls, harness-level steps, steering, reported tool results)
are consumed strictly in order; outcomes (completions, approval records, tool outcomes,
steps inside a tool) are found by call id, so concurrent tool calls that completed in
any order still match. Every record must be consumed by the end of a faithful replay,
except ``version_changed`` records, which are no effect: they are kept aside, to say
where the code changed (``changes``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from tether.errors import InvalidExecutionLog
from tether.journal._tool_policy import ATTEMPT_FAILED
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    Compaction,
    InputAnswered,
    InputRequested,
    ModelCalled,
    PatchMarked,
    Record,
    SteerReceived,
    StepRecorded,
    TaskFinished,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
    VersionChanged,
)

__all__ = ("Recorded",)

_OUTCOME_ROLES = {
    AssistantMessageCompleted.KIND: "completion",
    ApprovalRequested.KIND: "request",
    ApprovalDecided.KIND: "decision",
    InputRequested.KIND: "request",
    InputAnswered.KIND: "decision",
    ToolOutcome.KIND: "outcome",
    TaskSpawned.KIND: "spawned",
    TaskFinished.KIND: "finished",
}


class Recorded:
    def __init__(self, effects: Sequence[Record] = ()) -> None:
        self.records = list(effects)
        self._intents: list[int] = []
        self._next_intent = 0
        self._outcomes: dict[tuple[str, str], int] = {}
        self._tool_steps: dict[tuple[str, str], deque[int]] = {}
        self._every_tool_step: dict[tuple[str, str], list[int]] = {}
        """Each call's steps of each name, served or not: a retried attempt is served them
        again (``rewind_tool_steps``)."""
        self._consumed: set[int] = set()
        self.changes: list[Record] = []
        """The execution's ``version_changed`` records, in log order."""
        tool_calls: set[str] = set()
        # Classify from the raw payloads: only what is actually served gets validated.
        for index, record in enumerate(self.records):
            kind = record.kind
            raw = record.fields["payload"]
            call_id = str(raw.get("callId", ""))
            if kind in (ModelCalled.KIND, SteerReceived.KIND, Compaction.KIND, PatchMarked.KIND):
                self._intents.append(index)
            elif kind == VersionChanged.KIND:
                self.changes.append(record)
                self._consumed.add(index)
            elif kind == ToolCalled.KIND:
                if call_id in tool_calls:
                    raise InvalidExecutionLog(f"seq {record.seq}: call id {call_id} repeats")
                tool_calls.add(call_id)
                self._intents.append(index)
            elif kind in _OUTCOME_ROLES:
                if kind == ToolOutcome.KIND and call_id not in tool_calls:
                    self._intents.append(index)  # a result the harness reported for its own tool
                else:
                    self._index_outcome(_OUTCOME_ROLES[kind], call_id, index)
            elif kind == StepRecorded.KIND:
                if call_id in tool_calls:
                    key = (call_id, str(raw["name"]))
                    self._tool_steps.setdefault(key, deque()).append(index)
                    self._every_tool_step.setdefault(key, []).append(index)
                else:
                    self._intents.append(index)

    def _index_outcome(self, role: str, call_id: str, index: int) -> None:
        if (role, call_id) in self._outcomes:
            record = self.records[index]
            raise InvalidExecutionLog(f"seq {record.seq}: a second {role} for call {call_id}")
        self._outcomes[(role, call_id)] = index

    # --- serving --------------------------------------------------------------------

    @property
    def exhausted(self) -> bool:
        """No intent is left: what the harness asks next was never recorded."""
        return self._next_intent >= len(self._intents)

    def peek_intent(self) -> Record | None:
        if self.exhausted:
            return None
        return self.records[self._intents[self._next_intent]]

    def take_intent(self) -> Record:
        index = self._intents[self._next_intent]
        self._next_intent += 1
        self._consumed.add(index)
        return self.records[index]

    def outcome(self, role: str, call_id: str) -> Record | None:
        """The recorded outcome of a call (``completion``, ``request``, ``decision``,
        ``outcome``, ``spawned``, ``finished``), marking it consumed."""
        index = self._outcomes.get((role, call_id))
        if index is None:
            return None
        self._consumed.add(index)
        return self.records[index]

    def tool_step(self, call_id: str, name: str) -> Record | None:
        steps = self._tool_steps.get((call_id, name))
        if not steps:
            return None
        index = steps.popleft()
        self._consumed.add(index)
        return self.records[index]

    def consume_tool_steps(self, call_id: str) -> None:
        """A served tool outcome stands for the steps the tool took on its way there."""
        for (step_call, _), indexes in self._tool_steps.items():
            if step_call == call_id:
                self._consumed.update(indexes)
                indexes.clear()

    def failed_attempts(self, call_id: str) -> list[Record]:
        """The attempts of a call that failed and were to be tried again, in order."""
        steps = self._tool_steps.get((call_id, ATTEMPT_FAILED))
        if not steps:
            return []
        self._consumed.update(steps)
        failed = [self.records[index] for index in steps]
        steps.clear()
        return failed

    def rewind_tool_steps(self, call_id: str, live: Sequence[Record]) -> None:
        """Serve a call's next attempt the steps recorded for it, those the last attempt
        just appended (``live``) included, from the first again."""
        for record in live:
            self._consumed.add(len(self.records))
            key = (call_id, str(record.fields["payload"]["name"]))
            self._every_tool_step.setdefault(key, []).append(len(self.records))
            self.records.append(record)
        for (step_call, name), indexes in self._every_tool_step.items():
            if step_call == call_id and name != ATTEMPT_FAILED:
                self._tool_steps[(step_call, name)] = deque(indexes)

    def unconsumed(self) -> list[Record]:
        return [record for index, record in enumerate(self.records) if index not in self._consumed]
