"""What every store checks and builds when retention truncates a log's head (docs/retention.md).

A truncation replaces records 1..K with one ``log_truncated`` record at K that keeps the
removed record's ``prevHash`` and ``hash``: record K+1 links to it unchanged, and the chain
verifies from it (:func:`tether.records.verify_chain`). The store only places it; what it
carries (the transcript and the rest of the state at K) is the engine's to build.
"""

from __future__ import annotations

from tether._payloads import LogTruncated
from tether.errors import SeqOutOfRange, SeqTruncated
from tether.records import Record, RecordDraft, seal

__all__ = ("check_truncation", "seal_anchor", "truncated_through")


def truncated_through(draft: RecordDraft) -> int:
    """The seq an anchor draft replaces records up to; ``ValueError`` if it is no anchor."""
    payload = draft.payload
    if not isinstance(payload, LogTruncated):
        raise ValueError(f"a truncation takes a log_truncated record, not {draft.kind}")
    return payload.removed


def check_truncation(conversation_id: str, draft: RecordDraft, *, head: int, first: int) -> int:
    """The seq ``draft`` truncates through, checked against a log at ``head`` whose first
    stored record is at ``first`` (1, or its anchor's seq): ``SeqOutOfRange`` past the head,
    ``SeqTruncated`` at or before an earlier truncation's anchor."""
    through = truncated_through(draft)
    if through > head:
        raise SeqOutOfRange(conversation_id, through, head)
    if through <= first and first > 1:
        raise SeqTruncated(conversation_id, through, first)
    return through


def seal_anchor(
    draft: RecordDraft, *, conversation_id: str, session: str, replaced: Record
) -> Record:
    """The anchor ``draft`` seals into, in place of ``replaced`` (the last record removed):
    its content sealed at ``replaced``'s seq, with ``replaced``'s hashes. ``SeqTruncated``
    if an earlier truncation replaced it already; ``ValueError`` if the anchor was built from
    another record than the one the store holds there."""
    payload = draft.payload
    assert isinstance(payload, LogTruncated)
    if replaced.kind == LogTruncated.KIND:
        raise SeqTruncated(conversation_id, replaced.seq, replaced.seq)
    if payload.last_hash != replaced.hash:
        raise ValueError(
            f"conversation {conversation_id}: the record at seq {replaced.seq} is not the "
            "one this truncation was built from (another hash)"
        )
    sealed = seal(
        draft,
        conversation_id=conversation_id,
        session=session,
        seq=replaced.seq,
        prev_hash=replaced.prev_hash,
    )
    return Record(sealed.seq, sealed.kind, sealed.canonical, replaced.prev_hash, replaced.hash)
