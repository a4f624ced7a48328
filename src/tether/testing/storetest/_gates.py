"""Conformance cases for ``GateStore.list_gates``: approval gates, indexed in the commit of the
records that open, decide and close them, listed in request order, filtered and paged."""

from __future__ import annotations

import asyncio
import base64
import itertools
from typing import Any, Literal

import pytest
from pydantic import JsonValue

from tether.errors import ClaimLost, Conflict, Fenced, InvalidCursor
from tether.messages import ToolOutcomeStatus, args_digest
from tether.records import (
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    Payload,
    Record,
    RecordDraft,
    SettlementStatus,
    SubmissionSettled,
    ToolOutcome,
    format_time,
)
from tether.store import ClaimSettlement, Gate, GateStatus, SessionKey
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("FILTERS", "GateCases", "Writer")

FILTERS = ("agent", "instance", "tool")
Decision = Literal["approve", "reject", "edit"]


class Writer:
    """Writes gate records as the journal and the engine do, at chosen times."""

    def __init__(self, store: CompleteStore, fx: Fixtures) -> None:
        self.store, self.fx = store, fx

    def draft(
        self, payload: Payload, *, at: float = 0, execution: str = "exe-1", sub: str = "sub-1"
    ) -> RecordDraft:
        return RecordDraft(
            payload,
            id=self.fx.id("rec"),
            time=format_time(self.fx.at(at)),
            submission_id=sub,
            execution_id=execution,
        )

    async def request(
        self,
        cid: str,
        *,
        call: str = "call-1",
        tool: str = "send_email",
        args: dict[str, JsonValue] | None = None,
        at: float = 0,
        execution: str = "exe-1",
        fence: int = 0,
        metadata: dict[str, JsonValue] | None = None,
    ) -> str:
        """Append a request (as the turn does, at the head) and return its approval id."""
        head = await self.store.head(cid)
        chosen: dict[str, JsonValue] = args if args is not None else {"to": "bob@example.com"}
        approval_id = f"{cid}.{head + 1}"
        requested = ApprovalRequested(
            approval_id=approval_id,
            call_id=call,
            tool=tool,
            args=chosen,
            args_digest=args_digest(chosen),
            metadata=metadata,
        )
        draft = self.draft(requested, at=at, execution=execution)
        await self.store.append(cid, [draft], expected_seq=head, fence=fence)
        return approval_id

    def decided(
        self,
        approval_id: str,
        decision: Decision = "approve",
        *,
        call: str = "call-1",
        at: float = 1,
        **fields: Any,
    ) -> RecordDraft:
        payload = ApprovalDecided(
            approval_id=approval_id,
            call_id=call,
            decision=decision,
            approver=fields.pop("approver", "ann"),
            **fields,
        )
        return self.draft(payload, at=at)

    async def decide(
        self, cid: str, approval_id: str, decision: Decision = "approve", **kw: Any
    ) -> None:
        draft = self.decided(approval_id, decision, **kw)
        await self.store.append_decision(
            cid, [draft], expected_seq=await self.store.head(cid), wake=None
        )

    def outcome(
        self,
        *,
        call: str = "call-1",
        status: ToolOutcomeStatus = ToolOutcomeStatus.DENIED,
        at: float = 2,
        execution: str = "exe-1",
    ) -> RecordDraft:
        return self.draft(
            ToolOutcome(call_id=call, content="did not run", is_error=True, status=status),
            at=at,
            execution=execution,
        )

    async def append(self, cid: str, *drafts: RecordDraft, fence: int = 0) -> list[Record]:
        head = await self.store.head(cid)
        return await self.store.append(cid, list(drafts), expected_seq=head, fence=fence)


async def _one(store: CompleteStore, **filters: Any) -> Gate:
    [gate] = await store.list_gates(**filters)
    return gate


async def _everything(store: CompleteStore) -> list[Gate]:
    return await store.list_gates(limit=10_000)


@needs("gates")
class GateCases(BaseConformance):
    @case
    async def test_a_request_opens_a_pending_gate(self, store: CompleteStore, fx: Fixtures) -> None:
        w = Writer(store, fx)
        cid = await fx.conversation()
        approval_id = await w.request(cid, args={"to": "bob@example.com", "n": 1.5}, at=3)
        assert await store.list_gates() == [
            Gate(
                approval_id=approval_id,
                conversation_id=cid,
                seq=2,
                key=fx.key(),
                submission_id="sub-1",
                execution_id="exe-1",
                call_id="call-1",
                tool="send_email",
                args={"to": "bob@example.com", "n": 1.5},
                args_digest=args_digest({"to": "bob@example.com", "n": 1.5}),
                requested_at=fx.at(3),
                status=GateStatus.PENDING,
            )
        ]
        assert await store.list_gates(status=GateStatus.PENDING) == await store.list_gates()
        assert await store.list_gates(status=GateStatus.DECIDED) == []
        assert await store.list_gates(status=GateStatus.CLOSED) == []

    @case
    async def test_a_gate_keeps_what_the_framework_attached_to_its_request(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = Writer(store, fx)
        cid = await fx.conversation()
        attached: dict[str, JsonValue] = {"reason": "over 100 USD", "limits": [100, None]}
        first = await w.request(cid, call="call-1", metadata=attached)
        second = await w.request(cid, call="call-2")
        await w.decide(cid, first, "approve", call="call-1")
        gates = {gate.approval_id: gate for gate in await store.list_gates()}
        assert gates[first].metadata == attached  # kept once decided too
        assert gates[second].metadata is None

    @case
    async def test_a_decision_decides_its_gate_for_good(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = Writer(store, fx)
        cid = await fx.conversation()
        approval_id = await w.request(cid)
        edited = {"to": "amy@example.com"}
        await w.decide(cid, approval_id, "edit", args=edited, reason="not bob", at=5)
        gate = await _one(store, status=GateStatus.DECIDED)
        assert (gate.approval_id, gate.decision, gate.edited_args) == (approval_id, "edit", edited)
        assert (gate.reason, gate.approver, gate.decided_at) == ("not bob", "ann", fx.at(5))
        assert gate.closed_at is None and gate.args == {"to": "bob@example.com"}
        assert await store.list_gates(status=GateStatus.PENDING) == []
        # Decided is final: another decision, and the denied outcome of a rejection or of
        # a settlement that follows, leave it as it was.
        await w.decide(cid, approval_id, "reject", approver="bob", at=6)
        await w.append(cid, w.outcome(at=7))
        assert await store.list_gates() == [gate]

    @case
    async def test_a_decision_keeps_who_made_it(self, store: CompleteStore, fx: Fixtures) -> None:
        w = Writer(store, fx)
        cid = await fx.conversation()
        ann = Actor(subject="ann@acme", tenant="acme", display='Ann \u00e9"x"')
        signed = await w.request(cid, call="c1")
        anonymous = await w.request(cid, call="c2")
        operator = await w.request(cid, call="c3")
        await w.decide(cid, signed, call="c1", by=ann, approver="Ann")
        await w.decide(cid, anonymous, "reject", call="c2")
        await w.decide(cid, operator, call="c3", by=Actor(subject="root"))
        gates = await store.list_gates(status=GateStatus.DECIDED)
        assert [(g.approval_id, g.approver, g.decided_by) for g in gates] == [
            (signed, "Ann", ann),
            (anonymous, "ann", None),  # no one authenticated: the name shown only
            (operator, "ann", Actor(subject="root")),
        ]
        # Decided is final: a later decision by someone else changes no one.
        await w.decide(cid, signed, "reject", call="c1", by=Actor(subject="eve"))
        assert await store.list_gates(status=GateStatus.DECIDED) == gates
        # A request not yet decided names no one.
        await w.request(cid, call="c4")
        assert (await _one(store, status=GateStatus.PENDING)).decided_by is None

    @case
    async def test_a_denied_outcome_closes_a_pending_gate(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = Writer(store, fx)
        cid = await fx.conversation()
        approval_id = await w.request(cid)
        await w.append(
            cid,
            w.outcome(status=ToolOutcomeStatus.OK),  # no host writes one: it closes nothing
            w.outcome(execution="exe-2"),  # the same call id in another execution
            w.outcome(call="call-2"),
        )
        assert (await _one(store)).status is GateStatus.PENDING
        await w.append(cid, w.outcome(at=9))
        closed = await _one(store, status=GateStatus.CLOSED)
        assert (closed.approval_id, closed.closed_at, closed.decision) == (
            approval_id,
            fx.at(9),
            None,
        )
        await w.decide(cid, approval_id)  # too late: closed stays closed
        assert await store.list_gates() == [closed]

    @case
    async def test_one_batch_opens_and_decides_in_order(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = Writer(store, fx)
        cid = await fx.conversation()
        requested = ApprovalRequested(
            approval_id=f"{cid}.2", call_id="c", tool="t", args={}, args_digest=args_digest({})
        )
        await w.append(cid, w.draft(requested), w.decided(f"{cid}.2", "reject", call="c"))
        gate = await _one(store)
        assert (gate.status, gate.decision, gate.seq) == (GateStatus.DECIDED, "reject", 2)

    @case
    async def test_a_refused_append_indexes_nothing(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = Writer(store, fx)
        claimed = await fx.claim(await fx.admit())
        cid = claimed.conversation_id
        approval_id = await w.request(cid, fence=claimed.fence)
        pending = await _everything(store)
        head = await store.head(cid)
        request = ApprovalRequested(
            approval_id=f"{cid}.9", call_id="c9", tool="t", args={}, args_digest=args_digest({})
        )
        with pytest.raises(Conflict):
            await store.append(cid, [w.draft(request)], expected_seq=head - 1, fence=claimed.fence)
        with pytest.raises(Fenced):
            await store.append(cid, [w.draft(request)], expected_seq=head, fence=claimed.fence - 1)
        with pytest.raises(Conflict):
            await store.append_decision(
                cid, [w.decided(approval_id)], expected_seq=head - 1, wake=None
            )
        settled = w.draft(
            SubmissionSettled(status=SettlementStatus.ABORTED, error="aborted"), sub=claimed.id
        )
        settle = ClaimSettlement(claimed.id, "att-other", {"status": "aborted"}, fx.at(3))
        with pytest.raises(ClaimLost):
            await store.append_settled(
                cid,
                [w.outcome(), settled],
                expected_seq=head,
                fence=claimed.fence,
                settle=settle,
            )
        assert await _everything(store) == pending
        # The closing outcome and the settlement, in one commit.
        await store.append_settled(
            cid,
            [w.outcome(), settled],
            expected_seq=head,
            fence=claimed.fence,
            settle=ClaimSettlement(
                claimed.id, str(claimed.attempt_id), {"status": "aborted"}, fx.at(3)
            ),
        )
        assert (await _one(store)).status is GateStatus.CLOSED

    @case
    async def test_concurrent_requests_each_open_a_gate(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = Writer(store, fx)
        cids = [await fx.conversation(f"s{n}") for n in range(8)]
        await asyncio.gather(*(w.request(cid) for cid in cids))
        assert sorted(g.conversation_id for g in await _everything(store)) == sorted(cids)

    @case
    async def test_filters_order_and_pages(self, store: CompleteStore, fx: Fixtures) -> None:
        """Every combination of filters lists exactly its gates, in request order (time,
        then conversation id, then seq), and pages through them with cursors."""
        w = Writer(store, fx)
        keys = [SessionKey(agent, instance, "s") for agent in ("a", "b") for instance in ("x", "y")]
        cids = []
        for key in keys:
            conversation, _ = await store.ensure_conversation(
                key, conversation_id=fx.id("conv"), created_at=fx.at(0)
            )
            cids.append(conversation.id)
        times = itertools.cycle((4, 1, 1, 3, 2))  # ties broken by conversation id, then seq
        for n, cid in enumerate(cids * 3):
            approval_id = await w.request(
                cid, call=f"c{n}", tool=("mail", "pay")[n % 2], at=next(times)
            )
            if n % 3 == 1:
                await w.decide(cid, approval_id, call=f"c{n}")
            elif n % 3 == 2:
                await w.append(cid, w.outcome(call=f"c{n}"))
        everything = await _everything(store)
        assert len(everything) == 12
        assert [g.order_key for g in everything] == sorted(g.order_key for g in everything)
        assert len({g.status for g in everything}) == 3
        values = {"agent": ("a", "zz"), "instance": ("y",), "tool": ("pay",)}
        for n in range(len(FILTERS) + 1):
            for names in itertools.combinations(FILTERS, n):
                for chosen in itertools.product(*(values[name] for name in names)):
                    filters: dict[str, Any] = dict(zip(names, chosen, strict=True))
                    for status in (None, *GateStatus):
                        expected = [
                            g
                            for g in everything
                            if (status is None or g.status is status)
                            and filters.get("agent", g.key.agent) == g.key.agent
                            and filters.get("instance", g.key.instance) == g.key.instance
                            and filters.get("tool", g.tool) == g.tool
                        ]
                        assert await store.list_gates(status=status, **filters) == expected
                        paged: list[Gate] = []
                        after = None
                        while page := await store.list_gates(
                            status=status, limit=2, after=after, **filters
                        ):
                            assert len(page) <= 2
                            paged += page
                            after = page[-1].cursor
                        assert paged == expected, (status, filters)

    @case
    async def test_a_cursor_names_a_place_in_the_order(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = Writer(store, fx)
        cid = await fx.conversation()
        first = await w.request(cid, call="c1", at=1)
        await w.request(cid, call="c2", at=2)
        await w.decide(cid, first, call="c1")
        [decided, pending] = await _everything(store)
        # A decided gate's cursor places a listing of pending ones just as well.
        assert await store.list_gates(status=GateStatus.PENDING, after=decided.cursor) == [pending]
        assert await store.list_gates(after=pending.cursor) == []
        assert await store.list_gates(limit=1) == [decided]
        garbage = [
            "",
            "nope!",
            "bm9wZQ",
            base64.urlsafe_b64encode(b"1:99999999999999999999:c").decode(),
            base64.urlsafe_b64encode(b"1:0:c").decode(),
            base64.urlsafe_b64encode(b"x:1:c").decode(),
            base64.urlsafe_b64encode(b"1: 1:c").decode(),
            base64.urlsafe_b64encode(b"9999999999999999999:1:c").decode(),
            base64.urlsafe_b64encode(b"1:1:c\x00").decode(),
            base64.urlsafe_b64encode(b"1:1:").decode(),
            base64.urlsafe_b64encode(b"\xff:1:c").decode(),
        ]
        for cursor in garbage:
            with pytest.raises(InvalidCursor):
                await store.list_gates(after=cursor)
        with pytest.raises(ValueError):
            await store.list_gates(limit=0)
        assert await store.list_gates(agent="no\x00such") == []

    @needs("forks")
    @case
    async def test_a_fork_leaves_its_parents_gates_to_the_parent(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = Writer(store, fx)
        parent = await fx.conversation()
        pending = await w.request(parent, call="c1", at=1)
        decided = await w.request(parent, call="c2", at=2)
        await w.decide(parent, decided, call="c2")
        before = await _everything(store)
        child = await store.fork(
            parent,
            at_seq=await store.head(parent),
            key=fx.key("child"),
            new_conversation_id=fx.id("conv"),
            created_at=fx.at(3),
        )
        assert await _everything(store) == before
        # The child's own records change only the child's own gates.
        await w.append(child.id, w.outcome(call="c1"), w.decided(pending, call="c1"))
        assert await _everything(store) == before
        own = await w.request(child.id, call="c1", at=4)
        gates = await _everything(store)
        assert gates[:2] == before and [(g.approval_id, g.key) for g in gates[2:]] == [
            (own, fx.key("child"))
        ]

    @case
    async def test_listed_gates_are_copies(self, store: CompleteStore, fx: Fixtures) -> None:
        w = Writer(store, fx)
        cid = await fx.conversation()
        approval_id = await w.request(cid, args={"to": ["bob"]})
        await w.decide(cid, approval_id, "edit", args={"to": ["amy"]})
        gate = await _one(store)
        gate.args["to"].append("eve")
        assert gate.edited_args is not None
        gate.edited_args["to"].append("eve")
        again = await _one(store)
        assert (again.args, again.edited_args) == ({"to": ["bob"]}, {"to": ["amy"]})
