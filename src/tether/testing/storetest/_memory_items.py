"""Conformance cases for the ``memory`` capability (``MemoryItemStore``): long-term memory
items kept by namespace and key, listed by prefix, found by keywords and by embedding,
erased by prefix."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tether.store import MemoryItem
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("MemoryCases",)

ACME = ("acme", "u-1", "support")


@needs("memory")
class MemoryCases(BaseConformance):
    @case
    async def test_a_kept_item_is_read_back_and_replaced(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``put_memory`` keeps the value (JSON, as canonical JSON reads back: ``1.0`` is
        ``1``) and its text; a second put replaces them, keeping ``created_at``; putting the
        same again changes nothing but ``updated_at``; ``delete_memory`` forgets it once."""
        kept = await store.put_memory(
            ACME, "diet", {"likes": ["tea", 1.0]}, text="Likes tea", embedding=None, now=fx.at(0)
        )
        assert kept == MemoryItem(
            ACME, "diet", {"likes": ["tea", 1]}, "Likes tea", fx.at(0), fx.at(0)
        )
        assert kept.created_at.utcoffset() == timedelta(0)
        assert await store.get_memory(ACME, "diet") == kept
        assert await store.get_memory(ACME, "absent") is None
        assert await store.get_memory(("acme", "u-1"), "diet") is None
        replaced = await store.put_memory(
            ACME, "diet", "coffee", text="", embedding=[1.0], now=fx.at(5)
        )
        assert replaced == MemoryItem(ACME, "diet", "coffee", "", fx.at(0), fx.at(5))
        again = await store.put_memory(
            ACME, "diet", "coffee", text="", embedding=[1.0], now=fx.at(6)
        )
        assert (again.value, again.created_at, again.updated_at) == ("coffee", fx.at(0), fx.at(6))
        assert await store.delete_memory(ACME, "diet") is True
        assert await store.delete_memory(ACME, "diet") is False
        assert await store.get_memory(ACME, "diet") is None

    @case
    async def test_a_prefix_selects_whole_labels_in_code_point_order(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``list_memory`` and ``memory_namespaces`` under a prefix: by namespace then key,
        as code points; ``("a",)`` is no prefix of ``("ab",)``; ``()`` is every namespace."""
        for namespace, key in [
            (("a", "z"), "k2"),
            (("ab",), "k"),
            (("a",), "k"),
            (("a", "z"), "k1"),
            (("a", "Z", "deep"), "é"),
            (("b",), "k"),
        ]:
            await store.put_memory(namespace, key, key, text="", embedding=None, now=fx.at(0))
        under_a = await store.list_memory(("a",))
        assert [(i.namespace, i.key) for i in under_a] == [
            (("a",), "k"),
            (("a", "Z", "deep"), "é"),
            (("a", "z"), "k1"),
            (("a", "z"), "k2"),
        ]
        page = await store.list_memory(("a",), limit=2, offset=1)
        assert [(i.namespace, i.key) for i in page] == [
            (("a", "Z", "deep"), "é"),
            (("a", "z"), "k1"),
        ]
        assert len(await store.list_memory(())) == 6
        assert await store.memory_namespaces(("a",)) == [("a",), ("a", "Z", "deep"), ("a", "z")]
        assert await store.memory_namespaces((), limit=2, offset=2) == [("a", "z"), ("ab",)]
        assert await store.list_memory(("c",)) == []

    @case
    async def test_keyword_search_requires_every_word(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Keywords are runs of letters and digits, lowercased; an item matches when it has
        every keyword of the query; hits come most recently updated first, unscored."""
        texts = {
            "k1": "The user likes green TEA.",
            "k2": "tea_time at 5pm; green room",
            "k3": "coffee, black",
            "k4": "Green tea and green apples",
        }
        for seconds, (key, text) in enumerate(texts.items()):
            await store.put_memory(ACME, key, key, text=text, embedding=None, now=fx.at(seconds))
        await store.put_memory(("other",), "k5", 5, text="green tea", embedding=None, now=fx.at(9))

        async def keys(
            text: str, prefix: tuple[str, ...] = ("acme",), limit: int = 10, offset: int = 0
        ) -> list[str]:
            hits = await store.search_memory(prefix, text=text, limit=limit, offset=offset)
            assert all(hit.score is None for hit in hits)
            return [hit.item.key for hit in hits]

        assert await keys("tea green") == ["k4", "k2", "k1"]
        assert await keys("GREEN, tea!", limit=1, offset=1) == ["k2"]
        assert await keys("time") == ["k2"]
        assert await keys("black coffee") == ["k3"]
        assert await keys("tea milk") == []
        assert await keys("tea", prefix=()) == ["k5", "k4", "k2", "k1"]
        assert await keys("") == ["k4", "k3", "k2", "k1"]  # no keywords: every item

    @case
    async def test_semantic_search_ranks_by_cosine_within_its_bound(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """With a vector: items with an embedding of its length, ranked by cosine
        similarity (ties by namespace and key); ``scan`` scores only the most recently
        updated ones; keywords filter first."""
        vectors: dict[str, list[float] | None] = {
            "east": [1.0, 0.0],
            "north": [0.0, 2.0],
            "northeast": [1.0, 1.0],
            "west": [-3.0, 0.0],
            "flat": [1.0, 0.0, 0.0],  # another length: passed over
            "none": None,
            "east2": [5.0, 0.0],
        }
        for seconds, (key, vector) in enumerate(vectors.items()):
            await store.put_memory(
                ACME, key, key, text=f"direction {key}", embedding=vector, now=fx.at(seconds)
            )
        hits = await store.search_memory(("acme",), vector=[2.0, 0.0])
        assert [hit.item.key for hit in hits] == ["east", "east2", "northeast", "north", "west"]
        scores = [hit.score for hit in hits]
        assert scores[0] == pytest.approx(1.0) and scores[1] == pytest.approx(1.0)
        assert scores[2] == pytest.approx(2**-0.5)
        assert scores[3] == pytest.approx(0.0) and scores[4] == pytest.approx(-1.0)
        # The three most recently updated with an embedding: east2, flat (passed over), west.
        bounded = await store.search_memory(("acme",), vector=[2.0, 0.0], scan=3)
        assert [hit.item.key for hit in bounded] == ["east2", "west"]
        filtered = await store.search_memory(("acme",), text="direction north", vector=[1.0, 0.0])
        assert [hit.item.key for hit in filtered] == ["north"]
        paged = await store.search_memory(("acme",), vector=[2.0, 0.0], limit=2, offset=2)
        assert [hit.item.key for hit in paged] == ["northeast", "north"]

    @case
    async def test_erasing_a_prefix_removes_its_items_only(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``erase_memory`` removes every item under the prefix (their keywords too) and
        says how many; ``()`` removes the rest."""
        for namespace in [("acme", "u-1"), ("acme", "u-1", "support"), ("acme", "u-2"), ("beta",)]:
            await store.put_memory(namespace, "k", 1, text="tea", embedding=[1.0], now=fx.at(0))
        assert await store.erase_memory(("acme", "u-1")) == 2
        assert await store.memory_namespaces(()) == [("acme", "u-2"), ("beta",)]
        assert [h.item.namespace for h in await store.search_memory((), text="tea")] == [
            ("acme", "u-2"),
            ("beta",),
        ]
        assert await store.erase_memory(("acme", "u-1")) == 0
        assert await store.erase_memory(()) == 2
        assert await store.list_memory(()) == []

    @case
    async def test_erasing_what_was_not_updated_since(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """With ``updated_before``, ``erase_memory`` removes only the items last put before
        it, under the prefix (retention); a put since keeps an item."""
        await store.put_memory(("a",), "old", 1, text="x", embedding=None, now=fx.at(0))
        await store.put_memory(("a",), "kept", 1, text="x", embedding=None, now=fx.at(0))
        await store.put_memory(("b",), "old", 1, text="x", embedding=None, now=fx.at(0))
        await store.put_memory(("a",), "kept", 2, text="x", embedding=None, now=fx.at(20))
        await store.put_memory(("a",), "new", 1, text="x", embedding=None, now=fx.at(10))
        assert await store.erase_memory(("a",), updated_before=fx.at(10)) == 1
        assert [(i.namespace, i.key) for i in await store.list_memory(())] == [
            (("a",), "kept"),
            (("a",), "new"),
            (("b",), "old"),
        ]
        assert await store.erase_memory((), updated_before=fx.at(15)) == 2
        assert [h.item.key for h in await store.search_memory((), text="x")] == ["kept"]

    @case
    async def test_malformed_input_writes_nothing(self, store: CompleteStore, fx: Fixtures) -> None:
        """``ValueError``, the store untouched, for an empty namespace or label, a label
        with a control character, an empty key, a key or text with a NUL, a value that is
        no JSON, an empty or non-finite embedding, a page out of bounds."""
        bad_puts: list[dict[str, object]] = [
            {"namespace": ()},
            {"namespace": ("acme", "")},
            {"namespace": ("a\x1eb",)},
            {"key": ""},
            {"key": "a\x00"},
            {"text": "a\x00"},
            {"value": {"x": object()}},
            {"embedding": []},
            {"embedding": [float("nan")]},
        ]
        for bad in bad_puts:
            given: dict[str, object] = {
                "namespace": ACME,
                "key": "k",
                "value": 1,
                "text": "",
                "embedding": None,
                **bad,
            }
            with pytest.raises(ValueError):
                await store.put_memory(
                    given["namespace"],  # type: ignore[arg-type]
                    given["key"],  # type: ignore[arg-type]
                    given["value"],
                    text=given["text"],  # type: ignore[arg-type]
                    embedding=given["embedding"],  # type: ignore[arg-type]
                    now=fx.at(0),
                )
        with pytest.raises(ValueError):
            await store.list_memory(("acme",), limit=0)
        with pytest.raises(ValueError):
            await store.search_memory(("acme",), text="x", offset=-1)
        with pytest.raises(ValueError):
            await store.search_memory(("acme",), vector=[1.0], scan=0)
        with pytest.raises(ValueError):
            await store.get_memory((), "k")
        assert await store.list_memory(()) == []
