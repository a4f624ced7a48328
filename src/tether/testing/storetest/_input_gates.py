"""Conformance cases for input gates (``GateStore.list_gates(kind=...)``): an ``input_requested``
opens a gate of kind ``input`` beside the approvals, ``input_answered`` decides it with the
answer, a denied outcome closes it; the kind filter and the cursors work across both kinds."""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import JsonValue

from tether.messages import Mediation, ToolOutcomeStatus, args_digest
from tether.records import (
    Actor,
    ApprovalDecided,
    InputAnswered,
    InputRequested,
    RecordDraft,
    ToolCalled,
)
from tether.store import Gate, GateKind, GateStatus, SessionKey
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs
from tether.testing.storetest._gates import FILTERS, Writer

__all__ = ("InputGateCases",)

_KINDS = (GateKind.APPROVAL, GateKind.INPUT)
"""The kinds this case interleaves (budget gates have their own cases)."""
SCHEMA: dict[str, JsonValue] = {"type": "object", "required": ["city"]}


class _Asker(Writer):
    """Writes input records as ``Turn.ask`` and ``Runtime.answer`` do."""

    async def ask(
        self,
        cid: str,
        *,
        call: str = "ask-1",
        tool: str = "ask",
        args: dict[str, JsonValue] | None = None,
        prompt: str = "Which city?",
        schema: dict[str, JsonValue] | None = None,
        at: float = 0,
        execution: str = "exe-1",
        metadata: dict[str, JsonValue] | None = None,
    ) -> str:
        """Append the call and its request in one commit (as the turn does); the input id."""
        head = await self.store.head(cid)
        chosen: dict[str, JsonValue] = args if args is not None else {}
        input_id = f"{cid}.{head + 2}"
        called = ToolCalled(
            call_id=call, tool=tool, args=chosen, idempotency_key=call, mediation=Mediation.INPUT
        )
        requested = InputRequested(
            input_id=input_id,
            call_id=call,
            tool=tool,
            args=chosen,
            prompt=prompt,
            answer_schema=schema,
            metadata=metadata,
        )
        await self.append(
            cid,
            self.draft(called, at=at, execution=execution),
            self.draft(requested, at=at, execution=execution),
        )
        return input_id

    def answered(
        self,
        input_id: str,
        value: JsonValue,
        *,
        call: str = "ask-1",
        responder: str = "ann",
        at: float = 1,
        by: Actor | None = None,
    ) -> RecordDraft:
        payload = InputAnswered(
            input_id=input_id, call_id=call, value=value, responder=responder, by=by
        )
        return self.draft(payload, at=at)

    async def answer(self, cid: str, input_id: str, value: JsonValue, **kw: Any) -> None:
        draft = self.answered(input_id, value, **kw)
        await self.store.append_decision(
            cid, [draft], expected_seq=await self.store.head(cid), wake=None
        )


async def _everything(store: CompleteStore) -> list[Gate]:
    return await store.list_gates(limit=10_000)


@needs("gates")
class InputGateCases(BaseConformance):
    @case
    async def test_an_input_gate_keeps_what_the_framework_attached(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        asker = _Asker(store, fx)
        cid = await fx.conversation()
        input_id = await asker.ask(cid, metadata={"form": "address"})
        await asker.answer(cid, input_id, {"city": "Oslo"})
        (gate,) = await store.list_gates(kind=GateKind.INPUT)
        assert gate.metadata == {"form": "address"} and gate.status is GateStatus.DECIDED

    @case
    async def test_an_ask_opens_a_pending_input_gate(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = _Asker(store, fx)
        cid = await fx.conversation()
        args: dict[str, JsonValue] = {"value": {"q": "city", "n": 1.5}}
        input_id = await w.ask(cid, tool="interrupt", args=args, schema=SCHEMA, at=3)
        expected = Gate(
            approval_id=input_id,
            conversation_id=cid,
            seq=3,
            key=fx.key(),
            submission_id="sub-1",
            execution_id="exe-1",
            call_id="ask-1",
            tool="interrupt",
            args=args,
            args_digest=args_digest(args),
            requested_at=fx.at(3),
            status=GateStatus.PENDING,
            kind=GateKind.INPUT,
            prompt="Which city?",
            answer_schema=SCHEMA,
        )
        assert input_id == f"{cid}.3"
        assert await store.list_gates() == [expected]
        assert await store.list_gates(kind=GateKind.INPUT) == [expected]
        assert await store.list_gates(kind=GateKind.INPUT, status=GateStatus.PENDING) == [expected]
        assert await store.list_gates(kind=GateKind.APPROVAL) == []
        assert await store.list_gates(kind=GateKind.INPUT, status=GateStatus.DECIDED) == []
        # No schema: any JSON value will do.
        await w.ask(cid, call="ask-2", at=4)
        [_, loose] = await store.list_gates(kind=GateKind.INPUT)
        assert (loose.answer_schema, loose.args, loose.args_digest) == (None, {}, args_digest({}))

    @case
    async def test_an_answer_decides_its_input_gate(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = _Asker(store, fx)
        cid = await fx.conversation()
        input_id = await w.ask(cid)
        await w.answer(cid, input_id, {"city": "Oslo", "n": [1, 2.5]}, responder="bob", at=5)
        gate = (await store.list_gates(kind=GateKind.INPUT, status=GateStatus.DECIDED))[0]
        assert (gate.approval_id, gate.kind, gate.decision) == (input_id, GateKind.INPUT, "answer")
        assert (gate.answer, gate.approver, gate.decided_at) == (
            {"city": "Oslo", "n": [1, 2.5]},
            "bob",
            fx.at(5),
        )
        assert (gate.edited_args, gate.reason, gate.closed_at) == (None, None, None)
        assert await store.list_gates(status=GateStatus.PENDING) == []
        # Answered is final: another answer, the resumed call's outcome and a denied one
        # (a settlement that follows) leave it as it was.
        await w.answer(cid, input_id, "Bergen", responder="eve", at=6)
        ok = w.outcome(call="ask-1", status=ToolOutcomeStatus.OK, at=7)
        await w.append(cid, ok, w.outcome(call="ask-1", at=8))
        assert await _everything(store) == [gate]

    @case
    async def test_an_answer_keeps_who_gave_it(self, store: CompleteStore, fx: Fixtures) -> None:
        w = _Asker(store, fx)
        cid = await fx.conversation()
        bob = Actor(subject="bob@acme", tenant="acme")
        signed = await w.ask(cid, call="ask-1")
        anonymous = await w.ask(cid, call="ask-2")
        await w.answer(cid, signed, "Oslo", call="ask-1", responder="Bob", by=bob)
        await w.answer(cid, anonymous, None, call="ask-2")
        gates = await store.list_gates(kind=GateKind.INPUT, status=GateStatus.DECIDED)
        assert [(g.approval_id, g.approver, g.decided_by) for g in gates] == [
            (signed, "Bob", bob),
            (anonymous, "ann", None),
        ]
        # Answered is final: another answer by someone else changes no one.
        await w.answer(cid, signed, "Bergen", call="ask-1", by=Actor(subject="eve"))
        assert await store.list_gates(kind=GateKind.INPUT, status=GateStatus.DECIDED) == gates

    @case
    async def test_any_json_value_answers(self, store: CompleteStore, fx: Fixtures) -> None:
        w = _Asker(store, fx)
        cid = await fx.conversation()
        values: list[JsonValue] = [None, "Oslo", 0, False, [], {"a": None}, "é\u2028\x00"]
        for n, value in enumerate(values):
            input_id = await w.ask(cid, call=f"ask-{n}", at=n)
            await w.answer(cid, input_id, value, call=f"ask-{n}", at=n)
        gates = await store.list_gates(kind=GateKind.INPUT, status=GateStatus.DECIDED)
        assert [g.answer for g in gates] == values
        assert {g.decision for g in gates} == {"answer"}

    @case
    async def test_a_decision_of_one_kind_leaves_the_other(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """An approval's decision naming an input id, or an answer naming an approval id,
        decides nothing (the ids have one shape; the kinds keep them apart)."""
        w = _Asker(store, fx)
        cid = await fx.conversation()
        input_id = await w.ask(cid, call="c")
        approval_id = await w.request(cid, call="c")
        await w.decide(cid, input_id, call="c")
        await w.answer(cid, approval_id, "yes", call="c")
        assert {(g.kind, g.status) for g in await _everything(store)} == {
            (GateKind.INPUT, GateStatus.PENDING),
            (GateKind.APPROVAL, GateStatus.PENDING),
        }
        decided = ApprovalDecided(
            approval_id=approval_id, call_id="c", decision="reject", approver="ann"
        )
        await w.append(cid, w.draft(decided, at=4), w.answered(input_id, "yes", call="c", at=5))
        [asked, approval] = await _everything(store)
        assert (asked.decision, asked.answer, approval.decision, approval.answer) == (
            "answer",
            "yes",
            "reject",
            None,
        )

    @case
    async def test_a_denied_outcome_closes_a_pending_input_gate(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = _Asker(store, fx)
        cid = await fx.conversation()
        input_id = await w.ask(cid)
        approval_id = await w.request(cid, call="call-2")
        await w.append(
            cid,
            w.outcome(call="ask-1", status=ToolOutcomeStatus.OK),
            w.outcome(call="ask-1", execution="exe-2"),  # another execution's call
            w.outcome(call="ask-9"),
        )
        assert {g.status for g in await _everything(store)} == {GateStatus.PENDING}
        # One settlement's denied outcomes close the gates of both kinds.
        await w.append(cid, w.outcome(call="ask-1", at=9), w.outcome(call="call-2", at=9))
        [closed, shut] = await store.list_gates(status=GateStatus.CLOSED)
        assert (closed.approval_id, closed.kind, closed.closed_at) == (
            input_id,
            GateKind.INPUT,
            fx.at(9),
        )
        assert (closed.decision, closed.answer, closed.approver) == (None, None, None)
        assert (shut.approval_id, shut.kind) == (approval_id, GateKind.APPROVAL)
        await w.answer(cid, input_id, "too late")  # closed stays closed
        assert await store.list_gates(status=GateStatus.CLOSED) == [closed, shut]

    @case
    async def test_kinds_filter_and_page_across_mixed_kinds(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Approvals and inputs interleaved in every status: each kind, with every status and
        filter, lists exactly its gates in request order and pages through them; a cursor
        of either kind places a listing of the other."""
        w = _Asker(store, fx)
        keys = [SessionKey(agent, "x", "s") for agent in ("a", "b")]
        cids = []
        for key in keys:
            conversation, _ = await store.ensure_conversation(
                key, conversation_id=fx.id("conv"), created_at=fx.at(0)
            )
            cids.append(conversation.id)
        times = itertools.cycle((4, 1, 1, 3, 2, 2, 5))
        for n, cid in enumerate(cids * 6):
            call, at, tool = f"c{n}", next(times), ("mail", "ask")[n % 2]
            if n % 4 in (0, 3):
                gate_id = await w.ask(cid, call=call, tool=tool, at=at)
                if n % 3 == 1:
                    await w.answer(cid, gate_id, n, call=call)
            else:
                gate_id = await w.request(cid, call=call, tool=tool, at=at)
                if n % 3 == 1:
                    await w.decide(cid, gate_id, call=call)
            if n % 3 == 2:
                await w.append(cid, w.outcome(call=call))
        everything = await _everything(store)
        assert len(everything) == 12
        assert [g.order_key for g in everything] == sorted(g.order_key for g in everything)
        assert {(g.kind, g.status) for g in everything} == {
            (kind, status) for kind in _KINDS for status in GateStatus
        }
        values = {"agent": "a", "instance": "x", "tool": "ask"}
        for n in range(len(FILTERS) + 1):
            for names in itertools.combinations(FILTERS, n):
                filters: dict[str, Any] = {name: values[name] for name in names}
                for kind, status in itertools.product((None, *_KINDS), (None, *GateStatus)):
                    expected = [
                        g
                        for g in everything
                        if (kind is None or g.kind is kind)
                        and (status is None or g.status is status)
                        and filters.get("agent", g.key.agent) == g.key.agent
                        and filters.get("tool", g.tool) == g.tool
                    ]
                    listed = await store.list_gates(kind=kind, status=status, **filters)
                    assert listed == expected, (kind, status, filters)
                    paged: list[Gate] = []
                    after = None
                    while page := await store.list_gates(
                        kind=kind, status=status, limit=2, after=after, **filters
                    ):
                        assert len(page) <= 2
                        paged += page
                        after = page[-1].cursor
                    assert paged == expected, (kind, status, filters)
        for gate in everything:
            for kind in GateKind:
                past = [g for g in everything if g.kind is kind and g.order_key > gate.order_key]
                assert await store.list_gates(kind=kind, after=gate.cursor) == past

    @needs("forks")
    @case
    async def test_a_fork_leaves_its_parents_input_gates_to_the_parent(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = _Asker(store, fx)
        parent = await fx.conversation()
        pending = await w.ask(parent, call="c1", at=1)
        answered = await w.ask(parent, call="c2", at=2)
        await w.answer(parent, answered, "yes", call="c2")
        before = await _everything(store)
        child = await store.fork(
            parent,
            at_seq=await store.head(parent),
            key=fx.key("child"),
            new_conversation_id=fx.id("conv"),
            created_at=fx.at(3),
        )
        assert await _everything(store) == before
        assert await store.list_gates(kind=GateKind.INPUT, instance=fx.key().instance) == before
        # The child's own records change only the child's own gates.
        await w.append(child.id, w.outcome(call="c1"), w.answered(pending, "no", call="c1"))
        assert await _everything(store) == before
        own = await w.ask(child.id, call="c1", at=4)
        gates = await store.list_gates(kind=GateKind.INPUT)
        assert gates[:2] == before and [(g.approval_id, g.key) for g in gates[2:]] == [
            (own, fx.key("child"))
        ]

    @case
    async def test_listed_input_gates_are_copies(self, store: CompleteStore, fx: Fixtures) -> None:
        w = _Asker(store, fx)
        cid = await fx.conversation()
        input_id = await w.ask(cid, schema={"type": "object", "enum": [{"a": 1}]})
        await w.answer(cid, input_id, {"to": ["amy"]})
        [gate] = await store.list_gates()
        assert gate.answer_schema is not None
        gate.answer_schema["enum"].append("eve")
        gate.answer["to"].append("eve")
        [again] = await store.list_gates()
        assert (again.answer_schema, again.answer) == (
            {"type": "object", "enum": [{"a": 1}]},
            {"to": ["amy"]},
        )
