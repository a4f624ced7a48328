"""This process's log views, kept for the most recent conversations within a byte budget."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from tether.journal import LogView
from tether.records import Record
from tether.store import LogStore

__all__ = ("ViewCache",)

_VIEWS_KEPT = 512
_VIEW_BYTES_KEPT = 4 * 1024 * 1024
_PLACEHOLDER_BYTES = 64
_RECOUNT_EVERY = 16


class ViewCache:
    """Incremental views of conversations, bounded by count and by their records' bytes.

    A view is brought up to date by whoever uses it (a refresh, a journal's appends); the
    cache only decides which to keep. Views past ``max_bytes`` (the newest is kept whatever
    its size) or past ``max_views`` are dropped least recently used first, and read again
    from the store when next needed.
    """

    def __init__(self, *, max_bytes: int = _VIEW_BYTES_KEPT, max_views: int = _VIEWS_KEPT) -> None:
        self.max_bytes = max_bytes
        self.max_views = max_views
        self._views: OrderedDict[str, LogView] = OrderedDict()
        # id -> (records counted, their bytes, the first of them)
        self._sizes: dict[str, tuple[int, int, object]] = {}
        self.bytes = 0
        """The encoded bytes of the records the kept views hold (as last counted)."""
        self._calls = 0
        self._handed_out: set[str] = set()  # views handed out since the last full count

    def __len__(self) -> int:
        return len(self._views)

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self._views

    def __iter__(self) -> Iterator[str]:
        """The ids of the kept views, least recently used first."""
        return iter(list(self._views))

    async def refreshed(self, store: LogStore, conversation_id: str) -> LogView:
        """The kept view of a conversation, brought up to the log's head."""
        view = self.get(conversation_id)
        await view.refresh(store, conversation_id)
        return view

    def forget(self, conversation_id: str) -> None:
        """Drop a conversation's view (its log was erased)."""
        if self._views.pop(conversation_id, None) is not None:
            self.bytes -= self._sizes.pop(conversation_id, (0, 0, None))[1]
        self._handed_out.discard(conversation_id)

    def held(self) -> list[LogView]:
        """The kept views, least recently used first (without touching their order)."""
        return list(self._views.values())

    def get(self, conversation_id: str) -> LogView:
        """The kept view of a conversation (a new, empty one if none is kept)."""
        view = self._views.pop(conversation_id, None) or LogView()
        self._views[conversation_id] = view
        self._calls += 1
        # Views grow after they are handed out. Those handed out since the last full count
        # are counted on every call, all of them every so often (a run holds its view for
        # long): a call costs what changed, not the cache's size.
        if self._calls % _RECOUNT_EVERY == 0:
            self._handed_out.clear()
            for kept_id, kept_view in self._views.items():
                self._count(kept_id, kept_view)
        else:
            self._handed_out.add(conversation_id)
            for handed_id in self._handed_out:
                handed = self._views.get(handed_id)
                if handed is not None:
                    self._count(handed_id, handed)
        while len(self._views) > 1 and (
            len(self._views) > self.max_views or self.bytes > self.max_bytes
        ):
            forgotten, _ = self._views.popitem(last=False)
            self.bytes -= self._sizes.pop(forgotten, (0, 0, None))[1]
            self._handed_out.discard(forgotten)
        return view

    def _count(self, conversation_id: str, view: LogView) -> None:
        """Bring a view's byte count up to date, counting only records new since last time
        (all of them again if its first record changed: it started over, or a full refresh
        put the records a lean one had left as placeholders in their place)."""
        records = view.records
        first = records[0] if records else None
        counted, before, first_counted = self._sizes.get(conversation_id, (0, 0, None))
        if first is not first_counted or counted > len(records):
            counted, size = 0, 0
        else:
            size = before
        # A lean view's placeholders (not Records) count for the little they hold.
        size += sum(
            len(record.canonical) if isinstance(record, Record) else _PLACEHOLDER_BYTES
            for record in records[counted:]
        )
        self._sizes[conversation_id] = (len(records), size, first)
        self.bytes += size - before
