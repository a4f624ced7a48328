"""Importing a whole log (``ImportStore.import_conversation``): what every backend checks of it,
one record at a time, so that a log too long to hold streams from a file into one
transaction (an export of hundreds of megabytes is never a list in memory).

The records must be the whole log of the conversation as a store keeps it: they chain from
seq 1, or from the ``log_truncated`` record retention left (each hash re-derived from the
bytes, which must be canonical JSON); the record its own log begins with (seq 1, or a fork's
after the copied ones) is its ``conversation_created`` exactly as a store seals it (its id,
key, parent and creation time; and who made it, a fork's ``by``, as the record says), or is
carried as such by the ``log_truncated`` record that replaced it; and every record from there
on names it. The first record that fails raises
``LogTampered`` at its seq, and the backend's transaction writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import orjson
from pydantic import ValidationError

from tether._payloads import Actor, ConversationCreated, LogTruncated
from tether.errors import LogTampered
from tether.records import ChainVerifier, Record
from tether.store._common import conversation_created_draft, seal_created
from tether.store._types import Conversation

__all__ = ("IMPORT_BATCH_BYTES", "IMPORT_BATCH_RECORDS", "ImportCheck", "own_log_start")

IMPORT_BATCH_RECORDS: Final = 256
"""Records a backend writes per statement of an import (the whole import is one commit)."""
IMPORT_BATCH_BYTES: Final = 1 << 18
"""Canonical bytes past which a batch is written early: a log of large records stays
bounded in memory too."""


def own_log_start(conversation: Conversation) -> int:
    """The seq of ``conversation``'s own ``conversation_created`` record: 1, or after the
    records a fork copied from its parent."""
    parent = conversation.parent
    return parent.seq + 1 if parent is not None and parent.reason == "fork" else 1


class ImportCheck:
    """The checks of one import (see the module's doc): :meth:`check` each record in order,
    then :meth:`finish`. What it returns is a bare copy (seq, kind, bytes and hashes):
    nothing decoded and cached on a caller's objects is trusted, or kept, so what is checked
    is what is written."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.start = own_log_start(conversation)
        """The seq of the conversation's own ``conversation_created``: the records before it
        are a fork's copied ones (their gates stay the parent's)."""
        self.count = 0
        self.bytes = 0
        """The canonical bytes of the records checked (what the log costs to keep)."""
        self.first: Record | None = None
        self.last: Record | None = None
        self._chain = ChainVerifier(conversation.id)
        self._created = False

    def check(self, record: Record) -> Record:
        """Check the next record (``LogTampered`` naming its seq); its bare copy."""
        bare = Record(record.seq, record.kind, record.canonical, record.prev_hash, record.hash)
        cid, seq = self.conversation.id, bare.seq
        fields = self._chain.check(bare, canonical=True)
        if self.first is None:
            self.first = bare
            if self.start < seq or (self.start == seq and bare.kind == LogTruncated.KIND):
                carried = fields["payload"].get("created")
                if not isinstance(carried, dict) or not _is_created_of(self.conversation, carried):
                    raise LogTampered(
                        cid, seq, "log_truncated does not carry this conversation_created"
                    )
                self._created = True
        if seq == self.start and not self._created:
            prefix = [self.last] if self.last is not None else []
            if bare != seal_created(self.conversation, prefix, made_by(fields.get("payload"))):
                raise LogTampered(cid, seq, "not the conversation_created of this conversation")
            self._created = True
        elif seq > self.start and fields.get("conversationId") != cid:
            raise LogTampered(cid, seq, "a record of another conversation")
        self.last = bare
        self.count += 1
        self.bytes += len(bare.canonical)
        return bare

    def batches(self, records: Iterable[Record]) -> Iterator[list[Record]]:
        """``records``, each checked, in lists of at most :data:`IMPORT_BATCH_RECORDS`
        records or about :data:`IMPORT_BATCH_BYTES` bytes, for a backend to write as they
        come; :meth:`finish` must follow."""
        batch: list[Record] = []
        size = 0
        for record in records:
            batch.append(self.check(record))
            size += len(record.canonical)
            if len(batch) >= IMPORT_BATCH_RECORDS or size >= IMPORT_BATCH_BYTES:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    def finish(self) -> Record:
        """The last record, once every record was checked: ``LogTampered`` if the log ends
        before its ``conversation_created`` (or holds nothing)."""
        last = self._chain.last_seq
        if last < self.start or self.last is None:
            raise LogTampered(
                self.conversation.id,
                last + 1,
                f"the log ends at {last}, before its conversation_created",
            )
        return self.last


def made_by(payload: object) -> Actor | None:
    """Who a ``conversation_created`` payload says made it (a fork's ``by``): the one thing
    in it a store does not derive from the conversation, so the record is sealed again with
    it and compared whole. A ``by`` that is not an actor is none (the record then differs)."""
    by = payload.get("by") if isinstance(payload, Mapping) else None
    if by is None:
        return None
    try:
        return Actor.model_validate(by)
    except ValidationError:
        return None


def _is_created_of(conversation: Conversation, wire: Mapping[str, Any]) -> bool:
    """Whether a record's wire form is ``conversation``'s own ``conversation_created``."""
    draft = conversation_created_draft(conversation, made_by(wire.get("payload")))
    time = wire.get("time")
    # A fork's is sealed no earlier than the parent's record it follows, so it may be later
    # than its creation time (RFC 3339 in UTC with microseconds sorts as text).
    on_time = time == draft.time or (
        conversation.parent is not None
        and isinstance(time, str)
        and len(time) == len(draft.time)
        and time > draft.time
    )
    return (
        on_time
        and wire.get("kind") == ConversationCreated.KIND
        and wire.get("id") == conversation.id == wire.get("conversationId")
        and wire.get("payload") == orjson.loads(draft.payload_canonical)
    )
