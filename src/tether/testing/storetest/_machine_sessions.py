"""The session rules of the reference state machine: records with attachments, erasures,
exports imported again (as they were, after their conversation moved on or was erased, or
tampered with), the sessions index compared whole, with every filter and cursor, and
session metadata patched and searched with the words of messages.

A mixin of :class:`tether.testing.storetest._machine._ReferenceMachine`, which supplies the
stores, the event loop and ``_both`` (run one operation on both, require the same outcome).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from tether.records import AttachmentRef, Record, RecordDraft, UserMessage, format_time
from tether.store import Conversation, MemoryStore
from tether.testing.storetest._base import CompleteStore, Needed

__all__ = ("SessionRules",)

BLOBS = (b"one", b"two", b"three")
WORDS = ("refund", "Order", "parcel", "order_7", "été", "42")
METADATA_KEYS = ("customer", "tier", "vip")
METADATA_VALUES = (None, "acme", "globex", 1, 2.5, True, False)


async def _put(store: CompleteStore, *, blob: bytes) -> AttachmentRef:
    return await store.put_attachment(blob, media_type="text/plain")


class SessionRules:
    """Rules over the machine's conversations; the machine supplies what is declared here."""

    loop: asyncio.AbstractEventLoop
    reference: MemoryStore
    conversations: list[str]
    submissions: list[str]
    fences: dict[str, int]
    exports: list[tuple[Conversation, list[Record]]]

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

    def _export(self, cid: str) -> tuple[Conversation, list[Record]]:
        async def export() -> tuple[Conversation, list[Record]]:
            conversation = await self.reference.get_conversation(cid)
            return conversation, await self.reference.read(cid, limit=100_000)

        return self.loop.run_until_complete(export())

    @precondition(lambda self: self.conversations and self.offers("attachments"))
    @rule(data=st.data(), blobs=st.lists(st.sampled_from(BLOBS), min_size=1, max_size=2))
    def attach(self, data: st.DataObject, blobs: list[bytes]) -> None:
        """Attachments put, and referenced by a user message (some shared between logs)."""
        refs = [self._both(functools.partial(_put, blob=blob))[1] for blob in blobs]
        cid = data.draw(st.sampled_from(self.conversations))
        head = self.loop.run_until_complete(self.reference.head(cid))
        fence = self.fences.get(cid, 0)
        draft = RecordDraft(
            UserMessage(body="see", attachments=tuple(refs)),
            id=self._id("rec"),
            time=format_time(self._now()),
        )
        self._both(lambda s: s.append(cid, [draft], expected_seq=head, fence=fence))

    @precondition(lambda self: self.conversations)
    @rule(data=st.data())
    def export(self, data: st.DataObject) -> None:
        self.exports.append(self._export(data.draw(st.sampled_from(self.conversations))))

    @precondition(lambda self: self.conversations)
    @rule(data=st.data())
    def erase(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from([*self.conversations, "conv-absent"]))
        erased: list[str] = []
        if cid != "conv-absent":
            self.exports.append(self._export(cid))
            erased = [
                s.id
                for s in self.loop.run_until_complete(
                    self.reference.list_submissions(conversation_id=cid)
                )
            ]
        kind, _ = self._both(lambda s: s.erase_session(cid), needs="retention")
        if kind == "ok":
            self.conversations[:] = [c for c in self.conversations if c != cid]
            self.submissions[:] = [s for s in self.submissions if s not in erased]
            self.fences.pop(cid, None)

    @precondition(lambda self: self.exports)
    @rule(data=st.data(), tamper=st.sampled_from((None, None, None, "bytes", "hash", "cut")))
    def import_export(self, data: st.DataObject, tamper: str | None) -> None:
        conversation, records = data.draw(st.sampled_from(self.exports))
        records = list(records)
        seq = data.draw(st.integers(1, len(records)))
        if tamper == "bytes":
            r = records[seq - 1]
            records[seq - 1] = Record(r.seq, r.kind, r.canonical + b" ", r.prev_hash, r.hash)
        elif tamper == "hash":
            r = records[seq - 1]
            records[seq - 1] = Record(r.seq, r.kind, r.canonical, r.prev_hash, "0" * 64)
        elif tamper == "cut":
            del records[seq - 1]
        kind, created = self._both(
            lambda s: s.import_conversation(conversation, records), needs="import"
        )
        if kind == "ok" and created:
            self.conversations.append(conversation.id)

    @rule(
        data=st.data(),
        agent=st.sampled_from((None, "support", "nobody")),
        instance=st.sampled_from((None, "acme", "globex")),
        limit=st.integers(1, 4),
    )
    def list_sessions(
        self, data: st.DataObject, agent: str | None, instance: str | None, limit: int
    ) -> None:
        known = self.loop.run_until_complete(self.reference.list_sessions(limit=1000))
        after = data.draw(st.sampled_from([None, *(row.cursor for row in known)]))
        chosen = instance if agent is not None else None  # an instance only with its agent
        self._both(
            lambda s: s.list_sessions(agent=agent, instance=chosen, limit=limit, after=after),
            needs="sessions",
        )

    @precondition(lambda self: self.conversations)
    @rule(data=st.data(), words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def talk(self, data: st.DataObject, words: list[str]) -> None:
        """A message whose words a search finds."""
        cid = data.draw(st.sampled_from(self.conversations))
        head = self.loop.run_until_complete(self.reference.head(cid))
        fence = self.fences.get(cid, 0)
        draft = RecordDraft(
            UserMessage(body=", ".join(words) + "!"),
            id=self._id("rec"),
            time=format_time(self._now()),
        )
        self._both(lambda s: s.append(cid, [draft], expected_seq=head, fence=fence))

    @precondition(lambda self: self.conversations)
    @rule(
        data=st.data(),
        patch=st.dictionaries(
            st.sampled_from(METADATA_KEYS), st.sampled_from(METADATA_VALUES), max_size=3
        ),
    )
    def patch_metadata(self, data: st.DataObject, patch: dict[str, Any]) -> None:
        cid = data.draw(st.sampled_from([*self.conversations, "conv-absent"]))
        self._both(lambda s: s.patch_session_metadata(cid, patch), needs="sessions")

    @rule(
        data=st.data(),
        text=st.one_of(st.none(), st.lists(st.sampled_from(WORDS), max_size=2).map(" ".join)),
        metadata=st.dictionaries(
            st.sampled_from(METADATA_KEYS),
            st.sampled_from(("acme", "globex", "1", "2.5", "true", "false")),
            max_size=2,
        ),
        limit=st.integers(1, 4),
    )
    def search_sessions(
        self, data: st.DataObject, text: str | None, metadata: dict[str, str], limit: int
    ) -> None:
        known = self.loop.run_until_complete(self.reference.list_sessions(limit=1000))
        after = data.draw(st.sampled_from([None, *(row.cursor for row in known)]))
        self._both(
            lambda s: s.list_sessions(text=text, metadata=metadata, limit=limit, after=after),
            needs="sessions",
        )

    @invariant()
    def sessions_agree(self) -> None:
        self._both(lambda s: s.list_sessions(limit=1000), count=False, needs="sessions")
