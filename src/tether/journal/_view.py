"""An incrementally maintained reading of one conversation's log.

A journal refreshes its view before each operation by reading only the records appended
since, so a long conversation costs O(new records) per turn, not O(log).
"""

from __future__ import annotations

from tether.journal._executions import Execution, Executions, is_fork_marker
from tether.journal._history import Transcript
from tether.messages import Message
from tether.records import Record
from tether.store import LogStore

__all__ = ("LogView",)

_PAGE = 5000


class LogView:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.executions = Executions()
        self.fork_seq = 0
        self._transcript = Transcript()
        self._transcribed = 0  # records fed to the transcript: it is only built when asked for

    @property
    def head(self) -> int:
        return len(self.records)

    @property
    def latest(self) -> Execution | None:
        return self.executions.latest

    def add(self, record: Record) -> None:
        self.records.append(record)
        self.executions.add(record)
        if is_fork_marker(record):
            self.fork_seq = record.seq

    async def refresh(self, store: LogStore, conversation_id: str) -> None:
        """Read and take in every record appended since the last refresh."""
        while page := await store.read(conversation_id, after_seq=self.head, limit=_PAGE):
            for record in page:
                self.add(record)

    def messages(self) -> list[Message]:
        """The transcript of the whole log."""
        for record in self.records[self._transcribed :]:
            self._transcript.add(record)
        self._transcribed = len(self.records)
        return self._transcript.messages()

    def history_before(self, execution: Execution) -> list[Message]:
        """The transcript as it stood when ``execution`` started."""
        transcript = Transcript()
        for record in self.records[: execution.start_index]:
            transcript.add(record)
        return transcript.messages()
