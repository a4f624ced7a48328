"""Conformance cases for tenants: each conversation belongs to the tenant that created it
(``NewSubmission.tenant``), what is made of it inherits it (its submissions, its gates, its
forks, a task's child), an admission of another tenant into it is refused as if it did not
exist, and every listing filtered by a tenant lists only that tenant's rows, page after
page."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from tether.errors import ConversationNotFound, DispatchConflict, SessionExists
from tether.records import Actor, ConversationCreated, RecordDraft, UserMessage, format_time
from tether.store import GateKind, GateStatus, MemoryStore, ScheduleRow, Submission, TaskParent
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs
from tether.testing.storetest._gates import Writer
from tether.testing.storetest._records import export_log

__all__ = ("TenantCases",)

ACME, GLOBEX = "acme", "globex"
ANN = Actor(subject="ann", tenant=ACME, display="Ann")
BOB = Actor(subject="bob", tenant=ACME)


async def _made_by(store: CompleteStore, cid: str) -> Actor | None:
    """Who the conversation's ``conversation_created`` says made it."""
    [created] = await store.read(cid, after_seq=0, limit=1)
    assert isinstance(created.payload, ConversationCreated)
    return created.payload.by


async def _say(store: CompleteStore, fx: Fixtures, cid: str, at: float) -> None:
    """Append one message at ``at`` seconds: a last activity of its own for the sessions."""
    head = await store.head(cid)
    draft = RecordDraft(UserMessage(body="hi"), id=fx.id("rec"), time=format_time(fx.at(at)))
    await store.append(cid, [draft], expected_seq=head, fence=0)


async def _pages(list_page: Any, limit: int) -> list[Any]:
    """Every row of a listing read ``limit`` at a time, each page past the last row's cursor."""
    rows: list[Any] = []
    while page := await list_page(limit=limit, after=rows[-1].cursor if rows else None):
        assert len(page) <= limit
        rows += page
        if len(page) < limit:
            break
    return rows


class TenantCases(BaseConformance):
    """Tenants: recorded at creation, inherited, refused across, and filtered by."""

    @case
    async def test_an_admission_records_its_tenant(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        mine = await fx.admit("s-acme", tenant=ACME)
        assert mine.tenant == ACME
        conversation = await store.get_conversation(mine.conversation_id)
        assert conversation.tenant == ACME
        assert (await store.find_conversation(fx.key("s-acme"))).tenant == ACME
        assert (await store.get_submission(mine.id)).tenant == ACME
        operators = await fx.admit("s-none")
        assert operators.tenant is None
        assert (await store.get_conversation(operators.conversation_id)).tenant is None
        again = await fx.admit("s-acme", tenant=ACME)  # into its own: admitted
        assert again.tenant == ACME and again.conversation_id == mine.conversation_id

    @case
    async def test_the_admission_that_creates_a_conversation_records_who_made_it(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        first = await fx.admit("s", tenant=ACME, by=ANN)
        assert await _made_by(store, first.conversation_id) == ANN
        later = await fx.admit("s", tenant=ACME, by=BOB)  # an existing one is left as it is
        assert later.conversation_id == first.conversation_id
        assert await _made_by(store, first.conversation_id) == ANN
        await store.verify(first.conversation_id)
        nobody = await fx.admit("s-none")
        assert await _made_by(store, nobody.conversation_id) is None

    @needs("admit_and_claim")
    @case
    async def test_an_admission_and_claim_records_who_made_the_conversation(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        claimed = await store.admit_and_claim(
            fx.new("s", tenant=ACME, by=ANN),
            attempt_id=fx.id("att"),
            owner_id="owner-1",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
        )
        assert await _made_by(store, claimed.submission.conversation_id) == ANN

    @case
    async def test_an_operators_admission_takes_the_conversations_tenant(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        mine = await fx.admit("s", tenant=ACME)
        operators = await fx.admit("s", dispatch_id="op-1")
        assert operators.tenant == ACME and operators.conversation_id == mine.conversation_id
        replayed = await store.admit(fx.new("s", dispatch_id="op-1"))
        assert not replayed.created and replayed.submission.id == operators.id

    @case
    async def test_a_foreign_admission_is_not_found_and_writes_nothing(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        mine = await fx.admit("s", dispatch_id="d-1", tenant=ACME)
        none = await fx.admit("s-none")
        cid = mine.conversation_id
        before = (await store.head(cid), await store.list_submissions())
        # Another tenant's session, under a new dispatch id or a replay of this one (which
        # must not be handed back, nor told apart by a conflict), or one of no tenant.
        for refused in (
            fx.new("s", tenant=GLOBEX),
            fx.new("s", dispatch_id="d-1", tenant=GLOBEX),
            fx.new("s", dispatch_id="d-1", body="other", tenant=GLOBEX),
            fx.new("s-none", tenant=ACME),
        ):
            with pytest.raises(ConversationNotFound):
                await store.admit(refused)
        assert (await store.head(cid), await store.list_submissions()) == before
        assert await store.head(none.conversation_id) == 1

    @needs("admit_and_claim")
    @case
    async def test_a_foreign_admission_and_claim_is_not_found(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await fx.admit("s", tenant=ACME)
        before = await store.list_submissions()
        with pytest.raises(ConversationNotFound):
            await store.admit_and_claim(
                fx.new("s", tenant=GLOBEX),
                attempt_id=fx.id("att"),
                owner_id="owner-1",
                lease_expires_at=fx.at(60),
                now=fx.at(0),
            )
        assert await store.list_submissions() == before
        claimed = await store.admit_and_claim(
            fx.new("s-new", tenant=GLOBEX),
            attempt_id=fx.id("att"),
            owner_id="owner-1",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
        )
        assert claimed.submission.tenant == GLOBEX

    @needs("children")
    @case
    async def test_a_child_belongs_to_its_parents_tenant(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        parent = await fx.admit("s", tenant=ACME)
        link = TaskParent(parent.id, parent.conversation_id, seq=1, call_id="call-1")
        for asked in (None, GLOBEX):  # whatever the admission says
            child = await fx.admit(f"task-{asked}", parent=link, tenant=asked)
            assert child.tenant == ACME
            assert (await store.get_conversation(child.conversation_id)).tenant == ACME
        assert [c.tenant for c in await store.list_children(parent.id)] == [ACME, ACME]
        orphan_link = TaskParent("sub-absent", "conv-absent", seq=1, call_id="o")
        orphan = await fx.admit("task-orphan", parent=orphan_link, tenant=GLOBEX)
        assert orphan.tenant == GLOBEX  # a parent not held: the admission's own

    @needs("forks")
    @case
    async def test_a_fork_belongs_to_its_parents_tenant(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        mine = await fx.admit("s", tenant=ACME)
        fork = await store.fork(
            mine.conversation_id,
            at_seq=1,
            key=fx.key("forked"),
            new_conversation_id="conv-fork",
            created_at=fx.at(1),
        )
        assert fork.tenant == ACME == (await store.get_conversation("conv-fork")).tenant
        with pytest.raises(ConversationNotFound):  # the fork is the parent tenant's too
            await store.admit(fx.new("forked", tenant=GLOBEX))
        assert (await fx.admit("forked", tenant=ACME)).tenant == ACME

    @needs("import")
    @case
    async def test_an_import_belongs_to_the_tenant_it_is_imported_for(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        async with MemoryStore() as source:
            exported = (await source.admit(fx.new("s", tenant=ACME))).submission
            conversation, records = await export_log(source, exported.conversation_id)
        assert conversation.tenant == ACME
        assert await store.import_conversation(conversation, records, tenant=GLOBEX) is True
        assert (await store.get_conversation(conversation.id)).tenant == GLOBEX
        assert await store.import_conversation(conversation, records, tenant=GLOBEX) is False
        with pytest.raises(SessionExists):  # held, but another tenant's
            await store.import_conversation(conversation, records, tenant=ACME)
        with pytest.raises(ConversationNotFound):
            await store.admit(fx.new("s", tenant=ACME))

    @needs("sessions")
    @case
    async def test_the_sessions_of_a_tenant_page_after_page(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        tenants = (ACME, GLOBEX, None)
        for n in range(12):
            tenant = tenants[n % 3]
            agent, instance = ("support", "sales")[n % 2], ("x", "y")[n // 6]
            admitted = await fx.admit(f"s{n}", tenant=tenant, agent=agent, instance=instance)
            await _say(store, fx, admitted.conversation_id, at=(n * 7) % 12)
        every = await store.list_sessions(limit=100)
        assert {row.tenant for row in every} == {ACME, GLOBEX, None}
        session_filters: list[dict[str, Any]] = [
            {},
            {"agent": "support"},
            {"agent": "sales", "instance": "y"},
        ]
        for filters in session_filters:
            unfiltered = await store.list_sessions(limit=100, **filters)
            for tenant in (ACME, GLOBEX):
                expected = [row for row in unfiltered if row.tenant == tenant]
                assert expected, filters

                page = functools.partial(store.list_sessions, tenant=tenant, **filters)
                for limit in (1, 2, 100):
                    assert await _pages(page, limit) == expected
            # A cursor of one tenant's row, used by another, still lists only the other's.
            theirs = [row for row in unfiltered if row.tenant == GLOBEX]
            after_theirs = await store.list_sessions(
                tenant=ACME, after=theirs[0].cursor, limit=100, **filters
            )
            assert all(row.tenant == ACME for row in after_theirs)
        assert await store.list_sessions(tenant="nobody") == []

    @needs("gates")
    @case
    async def test_the_gates_of_a_tenant_page_after_page(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        writer = Writer(store, fx)
        tenants = (ACME, GLOBEX, None)
        for n in range(9):
            admitted = await fx.admit(f"s{n}", tenant=tenants[n % 3], agent=("a", "b")[n % 2])
            cid = admitted.conversation_id
            approval = await writer.request(cid, tool=("mail", "pay")[n % 2], at=(n * 5) % 9)
            if n % 4 == 1:
                head = await store.head(cid)
                decided = writer.decided(approval, "approve", at=10)
                await store.append_decision(cid, [decided], expected_seq=head, wake=None)
        every = await store.list_gates(limit=100)
        assert {gate.tenant for gate in every} == {ACME, GLOBEX, None}
        for filters in (
            {},
            {"status": GateStatus.PENDING},
            {"kind": GateKind.APPROVAL, "agent": "a"},
            {"status": GateStatus.DECIDED, "tool": "pay"},
        ):
            unfiltered = await store.list_gates(limit=100, **filters)
            for tenant in (ACME, GLOBEX):
                expected = [gate for gate in unfiltered if gate.tenant == tenant]

                page = functools.partial(store.list_gates, tenant=tenant, **filters)
                for limit in (1, 2, 100):
                    assert await _pages(page, limit) == expected
        theirs = [gate for gate in every if gate.tenant == GLOBEX]
        after_theirs = await store.list_gates(tenant=ACME, after=theirs[0].cursor)
        assert after_theirs and all(gate.tenant == ACME for gate in after_theirs)

    @case
    async def test_the_submissions_of_a_tenant(self, store: CompleteStore, fx: Fixtures) -> None:
        acme = [await fx.admit(f"s{n}", tenant=ACME) for n in range(3)]
        globex = await fx.admit("g", tenant=GLOBEX)
        await fx.admit("none")
        await fx.claim(acme[1])

        def ids(found: list[Submission]) -> list[str]:
            return [submission.id for submission in found]

        assert ids(await store.list_submissions(tenant=ACME)) == ids(acme)
        assert ids(await store.list_submissions(tenant=GLOBEX)) == [globex.id]
        queued = await store.list_submissions(tenant=ACME, status=acme[0].status)
        assert ids(queued) == [acme[0].id, acme[2].id]
        assert ids(await store.list_submissions(tenant=ACME, unsettled=True)) == ids(acme)
        own = await store.list_submissions(tenant=ACME, conversation_id=acme[0].conversation_id)
        assert ids(own) == [acme[0].id]
        foreign = await store.list_submissions(
            tenant=GLOBEX, conversation_id=acme[0].conversation_id
        )
        assert foreign == []
        assert len(await store.list_submissions()) == 5
        assert await store.list_submissions(tenant="nobody") == []

    @needs("schedules")
    @case
    async def test_the_schedules_of_a_tenant(self, store: CompleteStore, fx: Fixtures) -> None:
        kept = [
            await store.put_schedule(ScheduleRow(f"sched-{n}", {"n": n}, fx.at(n), tenant))
            for n, tenant in enumerate((ACME, GLOBEX, None, ACME))
        ]
        assert [row.tenant for row in kept] == [ACME, GLOBEX, None, ACME]
        assert await store.list_schedules(tenant=ACME) == [kept[0], kept[3]]
        assert await store.list_schedules(tenant=GLOBEX) == [kept[1]]
        assert await store.list_schedules() == kept
        assert await store.put_schedule(ScheduleRow("sched-0", {"n": 0}, fx.at(9), ACME)) == kept[0]
        for other in (GLOBEX, None):  # the same definition under another tenant: not the same
            with pytest.raises(DispatchConflict):
                await store.put_schedule(ScheduleRow("sched-0", {"n": 0}, fx.at(0), other))
