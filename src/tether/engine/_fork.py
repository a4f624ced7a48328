"""What ``Runtime.fork`` returns: the new session, and what its cut needed repaired."""

from __future__ import annotations

from dataclasses import dataclass, fields

from tether.records import Record, ToolOutcome
from tether.store import Conversation

__all__ = ("Fork",)


@dataclass(frozen=True, slots=True)
class Fork(Conversation):
    """A forked conversation. ``repaired`` holds the records the fork wrote to close its cut
    (:meth:`tether.journal.Journal.repair_cut`): empty unless ``at_seq`` fell inside an
    execution, between a call and its answer.

    Example::

        fork = await runtime.fork(conversation_id, at_seq=7, session="what-if")
        if fork.repaired_calls:
            print("tool calls given an interrupted result:", fork.repaired_calls)
    """

    repaired: tuple[Record, ...] = ()

    @classmethod
    def of(cls, conversation: Conversation, repaired: tuple[Record, ...] = ()) -> Fork:
        copied = {f.name: getattr(conversation, f.name) for f in fields(Conversation)}
        return cls(**copied, repaired=repaired)

    @property
    def repaired_calls(self) -> list[str]:
        """The tool calls the cut separated from their results, each now given an
        ``unknown`` result that says so."""
        return [
            record.payload.call_id
            for record in self.repaired
            if isinstance(record.payload, ToolOutcome)
        ]
