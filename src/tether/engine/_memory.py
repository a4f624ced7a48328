"""Long-term memory (``tether.Memory``, docs/memory.md): what agents keep across sessions,
by namespace and key, on the store's ``memory`` capability; found again by key, by keywords,
or by the similarity of an embedding the application's function computes.

Inside a run, every read and write goes through the run's journal (:meth:`Memory.journaled`
with the run's ``step``): its answer is recorded as a ``step_recorded`` record, so a replay
or a resume gets what the run saw even after the memory changed, and makes no call to the
store nor to the embedding function. A write is idempotent (a put of the same value, a
delete of what is gone), so a crash between a write and its record repeats it harmlessly.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from itertools import count
from typing import Any, cast

from pydantic import JsonValue

from tether.engine._clock import Clock, SystemClock
from tether.records import format_time
from tether.store import (
    MEMORY_SCAN,
    LogStore,
    MemoryHit,
    MemoryItem,
    MemoryItemStore,
    Namespace,
    StoreCapabilities,
    require_capability,
)

__all__ = ("Embed", "Memory", "StepRunner", "memory_text")

Embed = Callable[[Sequence[str]], Awaitable[Sequence[Sequence[float]]]]
"""The application's embedding function: one vector per text, in order (an OpenAI
``embeddings.create`` call, a local model). Tether never calls a provider of its own."""

StepRunner = Callable[[str, Callable[[], Awaitable[JsonValue]]], Awaitable[JsonValue]]
"""A journal's ``step(name, fn)``: ``Turn.step``, ``ToolContext.step`` or
``tether.integrations.step``."""

StoreSource = LogStore | Callable[[], LogStore]


class Memory:
    """Long-term memory on a store that offers the ``memory`` capability (every shipped
    store does): JSON values under a namespace (a tuple of labels, such as ``(tenant, user,
    agent)``) and a key.

    ``store`` is the store, or a function that returns it (``lambda: runtime.store``, for a
    memory made before its runtime starts). ``embed``, when given, makes semantic search
    possible: each put embeds the item's text, each search its query (``None``: keyword
    search only). ``scan`` bounds a semantic search: it scores at most that many items, the
    most recently updated under its prefix (brute force; see docs/memory.md).

    Example::

        memory = tether.Memory(runtime.store, embed=my_embeddings)
        await memory.put(("acme", "u-1"), "diet", {"likes": "green tea"})
        hits = await memory.search(("acme", "u-1"), "what does the user drink?")

        @tool
        async def preferences(ctx: ToolContext) -> list[str]:
            journaled = memory.journaled(ctx.step)  # recorded: replay sees the same
            return [hit.item.key for hit in await journaled.search(("acme",), "drinks")]
    """

    def __init__(
        self,
        store: StoreSource,
        *,
        embed: Embed | None = None,
        clock: Clock | None = None,
        scan: int = MEMORY_SCAN,
    ) -> None:
        self._source = store
        self.embed = embed
        self.clock: Clock = clock or SystemClock()
        self.scan = scan
        self._step: StepRunner | None = None
        self._numbers: count[int] | None = None

    def journaled(self, step: StepRunner, *, numbered: bool = False) -> Memory:
        """This memory, each operation of it run as a journaled step through ``step`` (its
        answer recorded, and served again on replay and resume). ``numbered``: name each
        step with its number in this view (``memory.get.1``, ...), for a ``step`` that keys
        steps by name (a tool call's ``ToolContext.step``: make one view per call).

        Example::

            recalled = await memory.journaled(turn.step).search(("acme",), "tea")
        """
        view = Memory(self._source, embed=self.embed, clock=self.clock, scan=self.scan)
        view._step = step
        view._numbers = count(1) if numbered else None
        return view

    @property
    def store(self) -> MemoryItemStore:
        """The store, as its ``memory`` capability (``StoreCapabilityMissing`` without it)."""
        store = self._source() if callable(self._source) else self._source
        return require_capability(StoreCapabilities.of(store).memory, "memory")

    async def _run(self, op: str, fn: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
        if self._step is None:
            return await fn()
        name = f"memory.{op}" if self._numbers is None else f"memory.{op}.{next(self._numbers)}"
        return await self._step(name, fn)

    async def _embed_one(self, text: str) -> list[float]:
        assert self.embed is not None
        vectors = await self.embed([text])
        if len(vectors) != 1:
            raise ValueError(f"the embedding function answered {len(vectors)} vectors for 1 text")
        return [float(x) for x in vectors[0]]

    async def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: JsonValue,
        *,
        text: str | None = None,
        index: bool = True,
    ) -> MemoryItem:
        """Keep ``value`` under ``namespace`` and ``key`` (replacing what was there).
        ``text`` is what search matches (default :func:`memory_text` of the value);
        ``index=False`` keeps no embedding (semantic search passes the item over).

        Example::

            await memory.put(("acme", "u-1"), "diet", {"likes": "green tea"})
        """
        labels = tuple(namespace)
        words = memory_text(value) if text is None else text

        async def put() -> JsonValue:
            vector = await self._embed_one(words) if self.embed and index and words else None
            item = await self.store.put_memory(
                labels, key, value, text=words, embedding=vector, now=self.clock.now()
            )
            return _item_json(item)

        return _item_of(await self._run("put", put))

    async def get(self, namespace: Sequence[str], key: str) -> MemoryItem | None:
        """The item under ``namespace`` and ``key``, or ``None``."""
        labels = tuple(namespace)

        async def get() -> JsonValue:
            # A list of none or one: a step's value is never null (a null value is left out
            # of its record, which then reads back without it).
            item = await self.store.get_memory(labels, key)
            return [] if item is None else [_item_json(item)]

        found = cast(builtins.list[JsonValue], await self._run("get", get))
        return _item_of(found[0]) if found else None

    async def delete(self, namespace: Sequence[str], key: str) -> bool:
        """Forget the item under ``namespace`` and ``key``; whether there was one."""
        labels = tuple(namespace)

        async def delete() -> JsonValue:
            return await self.store.delete_memory(labels, key)

        return bool(await self._run("delete", delete))

    async def list(
        self, prefix: Sequence[str] = (), *, limit: int = 100, offset: int = 0
    ) -> builtins.list[MemoryItem]:
        """The items under ``prefix``, by namespace then key."""
        labels = tuple(prefix)

        async def listed() -> JsonValue:
            items = await self.store.list_memory(labels, limit=limit, offset=offset)
            return [_item_json(item) for item in items]

        return [
            _item_of(item)
            for item in cast(builtins.list[JsonValue], await self._run("list", listed))
        ]

    async def namespaces(
        self, prefix: Sequence[str] = (), *, limit: int = 100, offset: int = 0
    ) -> builtins.list[Namespace]:
        """The namespaces under ``prefix`` that hold an item."""
        labels = tuple(prefix)

        async def listed() -> JsonValue:
            found = await self.store.memory_namespaces(labels, limit=limit, offset=offset)
            return [list(namespace) for namespace in found]

        answer = cast(builtins.list[list[str]], await self._run("namespaces", listed))
        return [tuple(namespace) for namespace in answer]

    async def search(
        self,
        prefix: Sequence[str] = (),
        query: str | None = None,
        *,
        keywords: str | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> builtins.list[MemoryHit]:
        """Search under ``prefix``: ``query`` semantically when the memory has an
        embedding function (most similar first, scored), else by its keywords (most
        recently updated first); ``keywords``: only items holding every one of these words.

        Example::

            hits = await memory.search(("acme", "u-1"), "drinks", limit=3)
        """
        labels = tuple(prefix)

        async def search() -> JsonValue:
            semantic = bool(self.embed and query)
            vector = await self._embed_one(query or "") if semantic else None
            text = " ".join(part for part in (keywords, None if semantic else query) if part)
            hits = await self.store.search_memory(
                labels,
                text=text or None,
                vector=vector,
                limit=limit,
                offset=offset,
                scan=self.scan,
            )
            return [{"item": _item_json(hit.item), "score": hit.score} for hit in hits]

        answer = cast(builtins.list[dict[str, JsonValue]], await self._run("search", search))
        return [
            MemoryHit(_item_of(hit["item"]), cast(float | None, hit["score"])) for hit in answer
        ]

    async def erase(self, prefix: Sequence[str]) -> int:
        """Remove for good every item under ``prefix`` (a tenant's, a user's); how many.

        Example::

            await memory.erase(("acme", "u-1"))  # the user asked to be forgotten
        """
        labels = tuple(prefix)

        async def erase() -> JsonValue:
            return await self.store.erase_memory(labels)

        return int(cast(int, await self._run("erase", erase)))


def memory_text(value: JsonValue) -> str:
    """The text keyword search matches in a value: a string itself, else every string in
    it (keys and values, depth first), joined by spaces.

    >>> memory_text({"likes": ["green tea", 3]})
    'likes green tea'
    """
    parts: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            parts.append(node)
        elif isinstance(node, dict):
            for name, inner in node.items():
                parts.append(str(name))
                walk(inner)
        elif isinstance(node, list):
            for inner in node:
                walk(inner)

    walk(value)
    return " ".join(parts)


def _item_json(item: MemoryItem) -> JsonValue:
    return {
        "namespace": list(item.namespace),
        "key": item.key,
        "value": item.value,
        "text": item.text,
        "createdAt": format_time(item.created_at),
        "updatedAt": format_time(item.updated_at),
    }


def _item_of(data: JsonValue) -> MemoryItem:
    fields = cast(dict[str, Any], data)
    return MemoryItem(
        namespace=tuple(fields["namespace"]),
        key=fields["key"],
        value=fields["value"],
        text=fields["text"],
        created_at=datetime.fromisoformat(fields["createdAt"]),
        updated_at=datetime.fromisoformat(fields["updatedAt"]),
    )
