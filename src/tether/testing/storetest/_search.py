"""Conformance cases for session metadata and search, part of the ``sessions`` capability
(``SessionListStore.patch_session_metadata`` and ``list_sessions``' ``metadata``, ``text``
and ``since`` filters).

Metadata is a flat object of scalars changed by RFC 7396 merge patches; a filter compares a
value's text form. A text search matches a session one of whose messages (a user's, a
steer, an assistant's completed text) holds every word of the query, in any case. Every
filter keeps the listing's order, cursors and tenants.
"""

from __future__ import annotations

import pytest

from tether.errors import ConversationNotFound, InvalidMetadata
from tether.messages import Message
from tether.records import AssistantMessageCompleted, SteerReceived, UserMessage
from tether.store import SessionRow
from tether.testing.storetest._base import (
    AGENT,
    BaseConformance,
    CompleteStore,
    Fixtures,
    case,
    needs,
)
from tether.testing.storetest._records import append_all, draft_at, open_conversation
from tether.testing.storetest._sessions import listed_ids, listed_row

__all__ = ("SessionSearchCases",)


async def _said(store: CompleteStore, fx: Fixtures, cid: str, at: float, body: str) -> None:
    await append_all(store, cid, draft_at(fx, at, UserMessage(body=body)))


def _answer(text: str, **kwargs: object) -> AssistantMessageCompleted:
    return AssistantMessageCompleted(
        call_id="call-1",
        message=Message.assistant(text),
        **kwargs,
    )


@needs("sessions")
class SessionSearchCases(BaseConformance):
    """Session metadata (merge patches, bounds) and search (metadata, full text, since)."""

    @case
    async def test_metadata_is_merge_patched(self, store: CompleteStore, fx: Fixtures) -> None:
        await open_conversation(store, "conv-1", 1)
        assert (await listed_row(store, "conv-1")).metadata == {}
        merged = await store.patch_session_metadata(
            "conv-1", {"customer": "acme", "tier": 2, "vip": True, "score": 2.5}
        )
        assert merged == {"customer": "acme", "score": 2.5, "tier": 2, "vip": True}
        assert list(merged) == ["customer", "score", "tier", "vip"]  # keys sorted
        merged = await store.patch_session_metadata(
            "conv-1", {"tier": None, "vip": False, "absent": None, "région": "eu"}
        )
        assert merged == {"customer": "acme", "région": "eu", "score": 2.5, "vip": False}
        assert (await listed_row(store, "conv-1")).metadata == merged
        assert await store.patch_session_metadata("conv-1", {}) == merged
        with pytest.raises(ConversationNotFound):
            await store.patch_session_metadata("conv-none", {"a": "b"})

    @case
    async def test_metadata_out_of_bounds_is_refused(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await open_conversation(store, "conv-1", 1)
        await store.patch_session_metadata("conv-1", {"kept": "yes"})
        refused: list[object] = [
            {"": "empty key"},
            {"k" * 65: "long key"},
            {"nested": {"a": 1}},
            {"list": [1]},
            {"nan": float("nan")},
            {"nul": "a\x00b"},
            {f"k{n}": n for n in range(64)},  # 65 keys with the kept one
            {"big": "x" * 8200},
            ["not", "an", "object"],
        ]
        for patch in refused:
            with pytest.raises(InvalidMetadata):
                await store.patch_session_metadata("conv-1", patch)  # type: ignore[arg-type]
        assert (await listed_row(store, "conv-1")).metadata == {"kept": "yes"}
        with pytest.raises(InvalidMetadata):
            await store.list_sessions(metadata={f"k{n}": "v" for n in range(9)})
        with pytest.raises(InvalidMetadata):
            await store.list_sessions(metadata={"k": "v" * 1025})

    @case
    async def test_sessions_filter_by_metadata(self, store: CompleteStore, fx: Fixtures) -> None:
        for n in range(6):
            await open_conversation(store, f"conv-{n}", n, session=f"s{n}")
            await store.patch_session_metadata(
                f"conv-{n}",
                {"customer": ("acme", "globex")[n % 2], "tier": n % 3, "odd": n % 2 == 1},
            )
        await open_conversation(store, "conv-bare", 9, session="bare")
        assert await listed_ids(store, metadata={"customer": "acme"}) == [
            "conv-4",
            "conv-2",
            "conv-0",
        ]
        assert await listed_ids(store, metadata={"customer": "acme", "tier": "1"}) == ["conv-4"]
        assert await listed_ids(store, metadata={"odd": "true"}) == ["conv-5", "conv-3", "conv-1"]
        assert await listed_ids(store, metadata={"tier": "2.0"}) == []  # text forms compare
        assert await listed_ids(store, metadata={"customer": "initech"}) == []
        assert await listed_ids(store, metadata={"nobody": "acme"}) == []
        assert await listed_ids(store, metadata={}) == await listed_ids(store)
        assert await listed_ids(store, metadata={"customer": "acme"}, agent="sales") == []
        await store.patch_session_metadata("conv-4", {"customer": None})
        assert await listed_ids(store, metadata={"customer": "acme"}) == ["conv-2", "conv-0"]
        # Pages of a search, one after another, list each match once, in order.
        everything = await store.list_sessions(metadata={"customer": "globex"})
        paged: list[SessionRow] = []
        after: str | None = None
        while page := await store.list_sessions(
            limit=1, after=after, metadata={"customer": "globex"}
        ):
            paged += page
            after = page[-1].cursor
        assert paged == everything and len(paged) == 3

    @case
    async def test_sessions_search_the_text_of_their_messages(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        for n in range(4):
            await open_conversation(store, f"conv-{n}", n, session=f"s{n}")
        await _said(store, fx, "conv-0", 5, "My order #123 needs a REFUND, please")
        await _said(store, fx, "conv-1", 6, "refund")
        await _said(store, fx, "conv-1", 7, "order status?")
        await append_all(
            store, "conv-2", draft_at(fx, 8, _answer("Your refund for order 123 is on its way"))
        )
        steer = SteerReceived(body="Ask about the invoice", mode="steer")
        await append_all(store, "conv-3", draft_at(fx, 9, steer))
        await append_all(
            store,
            "conv-3",
            draft_at(fx, 10, _answer("a secret summary", purpose="summary")),
            draft_at(fx, 11, _answer("cut short", interrupted=True)),
        )
        assert await listed_ids(store, text="refund") == ["conv-2", "conv-1", "conv-0"]
        assert await listed_ids(store, text="Refund ORDER") == ["conv-2", "conv-0"]  # one message
        assert await listed_ids(store, text="order, refund! 123") == ["conv-2", "conv-0"]
        assert await listed_ids(store, text="invoice") == ["conv-3"]
        assert await listed_ids(store, text="refun") == []  # words, not prefixes
        assert await listed_ids(store, text="summary") == []
        assert await listed_ids(store, text="short") == []
        assert await listed_ids(store, text="hello") == []
        assert await listed_ids(store, text="  ?! ") == await listed_ids(store)  # no words
        assert await listed_ids(store, text="refund", metadata={"a": "b"}) == []
        await store.patch_session_metadata("conv-0", {"a": "b"})
        assert await listed_ids(store, text="refund", metadata={"a": "b"}) == ["conv-0"]
        assert await listed_ids(store, text="refund", agent=AGENT, instance="other") == []

    @case
    async def test_sessions_filter_by_activity_since(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        for n in range(5):
            await open_conversation(store, f"conv-{n}", n * 10, session=f"s{n}")
        await _said(store, fx, "conv-0", 45, "late word")
        assert await listed_ids(store, since=fx.at(20)) == ["conv-0", "conv-4", "conv-3", "conv-2"]
        assert await listed_ids(store, since=fx.at(21)) == ["conv-0", "conv-4", "conv-3"]
        assert await listed_ids(store, since=fx.at(46)) == []
        assert await listed_ids(store, since=fx.at(0), text="late") == ["conv-0"]
        assert await listed_ids(store, since=fx.at(46), text="late") == []

    @case
    async def test_a_search_sees_only_its_tenants_sessions(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        ids = {}
        for tenant in ("t1", "t2", None):
            submission = await fx.admit(f"s-{tenant}", tenant=tenant, body="x")
            ids[tenant] = cid = submission.conversation_id
            await _said(store, fx, cid, 1, "shared secret words")
            await store.patch_session_metadata(cid, {"project": "apollo"})
        for tenant in ("t1", "t2"):
            assert await listed_ids(store, tenant=tenant, text="secret") == [ids[tenant]]
            assert await listed_ids(store, tenant=tenant, metadata={"project": "apollo"}) == [
                ids[tenant]
            ]
        assert len(await listed_ids(store, text="secret")) == 3

    @needs("retention")
    @case
    async def test_an_erase_removes_a_sessions_metadata_and_words(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await open_conversation(store, "conv-1", 1, session="a")
        await open_conversation(store, "conv-2", 2, session="b")
        for cid in ("conv-1", "conv-2"):
            await _said(store, fx, cid, 3, "confidential plan")
            await store.patch_session_metadata(cid, {"case": "42"})
        await store.erase_session("conv-1")
        assert await listed_ids(store, text="confidential") == ["conv-2"]
        assert await listed_ids(store, metadata={"case": "42"}) == ["conv-2"]
        # A conversation made again under the same session starts with none of it.
        await open_conversation(store, "conv-3", 4, session="a")
        assert (await listed_row(store, "conv-3")).metadata == {}
        assert await listed_ids(store, text="confidential") == ["conv-2"]

    @needs("forks")
    @case
    async def test_a_fork_is_found_by_the_messages_it_copied(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await open_conversation(store, "conv-1", 1)
        await _said(store, fx, "conv-1", 2, "the original question")
        await store.patch_session_metadata("conv-1", {"a": "b"})
        await store.fork(
            "conv-1",
            at_seq=2,
            key=fx.key("fork"),
            new_conversation_id="conv-f",
            created_at=fx.at(3),
        )
        assert await listed_ids(store, text="original question") == ["conv-f", "conv-1"]
        assert (await listed_row(store, "conv-f")).metadata == {}  # a fork starts with none
