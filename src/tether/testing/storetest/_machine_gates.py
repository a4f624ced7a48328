"""The gate rules of the reference state machine: records that open, decide and close
approval and input gates (or miss), and listings compared whole, with every filter, kind
and cursor.

A mixin of :class:`tether.testing.storetest._machine._ReferenceMachine`, which supplies the
stores, the event loop and ``_both`` (run one operation on both, require the same outcome).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from pydantic import JsonValue

from tether.messages import ToolOutcomeStatus, args_digest
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    InputAnswered,
    InputRequested,
    Payload,
    RecordDraft,
    ToolOutcome,
    format_time,
)
from tether.store import GateKind, GateStatus, MemoryStore
from tether.testing.storetest._base import CompleteStore, Needed

__all__ = ("GateRules",)

TOOLS = ("mail", "pay")


class GateRules:
    """Rules over the machine's conversations; the machine supplies what is declared here."""

    loop: asyncio.AbstractEventLoop
    reference: MemoryStore
    conversations: list[str]
    fences: dict[str, int]

    def _both(
        self,
        operation: Callable[[CompleteStore], Awaitable[Any]],
        *,
        count: bool = True,
        needs: Needed | None = None,
    ) -> Any:
        raise NotImplementedError

    def offers(self, needed: Needed) -> bool:
        raise NotImplementedError

    def _id(self, prefix: str) -> str:
        raise NotImplementedError

    def _now(self) -> datetime:
        raise NotImplementedError

    @precondition(lambda self: self.conversations)
    @rule(
        data=st.data(),
        kind=st.sampled_from(("request", "request", "ask", "decide", "answer", "close")),
        decision=st.booleans(),
        call=st.sampled_from(("c1", "c2")),
        execution=st.sampled_from(("e1", "e2", None)),
        head_offset=st.sampled_from((0, 0, 0, -1)),
    )
    def gate_record(
        self,
        data: st.DataObject,
        kind: str,
        decision: bool,
        call: str,
        execution: str | None,
        head_offset: int,
    ) -> None:
        """A record that opens, decides or closes a gate of either kind (or misses: another
        call, another execution, an outcome that is not denied, an unknown id, a decision of
        the other kind), appended as a writer's turn or as a decision."""
        cid = data.draw(st.sampled_from(self.conversations))
        known = self.loop.run_until_complete(self.reference.list_gates(limit=1000))
        pending = [g for g in known if g.status is GateStatus.PENDING]
        if kind != "request" and pending and data.draw(st.booleans()):
            target = data.draw(st.sampled_from(pending))  # usually a hit
            cid, call, execution = target.conversation_id, target.call_id, target.execution_id
        head = self.loop.run_until_complete(self.reference.head(cid))
        payload: Payload
        if kind == "request":
            args: dict[str, JsonValue] = {"n": data.draw(st.integers(0, 3))}
            payload = ApprovalRequested(
                approval_id=f"{cid}.{head + 1}",
                call_id=call,
                tool=data.draw(st.sampled_from(TOOLS)),
                args=args,
                args_digest=args_digest(args),
            )
        elif kind == "ask":
            payload = InputRequested(
                input_id=f"{cid}.{head + 1}",
                call_id=call,
                tool=data.draw(st.sampled_from(TOOLS)),
                args={"n": data.draw(st.integers(0, 3))},
                prompt="?",
                answer_schema=None if decision else {"type": "integer"},
            )
        elif kind in ("decide", "answer"):
            mine = [g.approval_id for g in known if g.conversation_id == cid]
            gate_id = data.draw(
                st.sampled_from([*mine, *mine, *(g.approval_id for g in known), "x.1"])
            )
            if kind == "answer":
                value = data.draw(st.sampled_from((None, 7, "yes", {"n": [1]})))
                payload = InputAnswered(
                    input_id=gate_id, call_id=call, value=value, responder="bob"
                )
            else:
                payload = ApprovalDecided(
                    approval_id=gate_id,
                    call_id=call,
                    decision="approve" if decision else "edit",
                    args=None if decision else {"n": 9},
                    approver="ann",
                )
        else:
            status = ToolOutcomeStatus.DENIED if decision else ToolOutcomeStatus.OK
            payload = ToolOutcome(call_id=call, content="no", is_error=True, status=status)
        draft = RecordDraft(
            payload, id=self._id("rec"), time=format_time(self._now()), execution_id=execution
        )
        expected = head + head_offset
        if kind in ("decide", "answer"):
            self._both(
                lambda s: s.append_decision(cid, [draft], expected_seq=expected, wake=None),
                needs="gates",
            )
        else:
            fence = self.fences.get(cid, 0)
            self._both(lambda s: s.append(cid, [draft], expected_seq=expected, fence=fence))

    @rule(
        data=st.data(),
        status=st.sampled_from((None, *GateStatus)),
        kind=st.sampled_from((None, *GateKind)),
        agent=st.sampled_from((None, "support", "nobody")),
        instance=st.sampled_from((None, "acme", "globex")),
        tool=st.sampled_from((None, *TOOLS)),
        limit=st.integers(1, 4),
    )
    def list_gates(
        self,
        data: st.DataObject,
        status: GateStatus | None,
        kind: GateKind | None,
        agent: str | None,
        instance: str | None,
        tool: str | None,
        limit: int,
    ) -> None:
        known = self.loop.run_until_complete(self.reference.list_gates(limit=1000))
        after = data.draw(st.sampled_from([None, *(g.cursor for g in known)]))
        self._both(
            lambda s: s.list_gates(
                status=status,
                kind=kind,
                agent=agent,
                instance=instance,
                tool=tool,
                limit=limit,
                after=after,
            ),
            needs="gates",
        )

    @invariant()
    def gates_agree(self) -> None:
        self._both(lambda s: s.list_gates(limit=1000), count=False, needs="gates")
