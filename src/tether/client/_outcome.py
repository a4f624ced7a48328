"""Where a sent message stands: :class:`Outcome`, what ``send`` returns."""

from __future__ import annotations

from dataclasses import dataclass

from tether.wire import ApprovalItem, InputItem, Settlement

__all__ = ("Outcome",)


@dataclass(frozen=True)
class Outcome:
    """A dispatch, once followed: settled (``settlement``), or held by ``approval``, a
    pending approval, or by ``input``, a pending question (of its own run or of a run ahead
    of it in the session: :attr:`queued_behind`); with neither, admitted and not waited for.

    Example::

        outcome = client.send("assistant", "ann", "email bob", wait=True)
        if outcome.approval is not None:
            client.decide(outcome.approval.approval_id, "approve")
            outcome = client.wait(outcome)
        print(outcome.settlement.result if outcome.settlement else outcome)
    """

    agent: str
    instance: str
    session: str
    submission_id: str
    conversation_id: str
    settlement: Settlement | None = None
    approval: ApprovalItem | None = None
    input: InputItem | None = None

    @property
    def settled(self) -> bool:
        return self.settlement is not None

    @property
    def queued_behind(self) -> bool:
        """Held by another submission's gate, which runs ahead of this one in the session."""
        held = self.approval if self.approval is not None else self.input
        return held is not None and held.submission_id != self.submission_id
