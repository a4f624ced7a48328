"""Copying logs between stores, to simulate a crash at any seq."""

from __future__ import annotations

from datetime import datetime

from tether.errors import ConversationNotFound
from tether.records import RecordDraft
from tether.store import Store

__all__ = ("copy_prefix",)


async def copy_prefix(source: Store, conversation_id: str, through_seq: int, target: Store) -> None:
    """Copy records 1..``through_seq`` of a (root) conversation into ``target`` byte for byte.

    The copy has the same conversation id and the same hashes, as if the process writing
    the log had died right after ``through_seq``.
    """
    conversation = await source.get_conversation(conversation_id)
    if conversation.parent is not None:
        raise ConversationNotFound(f"{conversation_id} is a fork; copy its root instead")
    records = await source.read(conversation_id, limit=through_seq)
    created = records[0]
    await target.ensure_conversation(
        conversation.key,
        conversation_id=conversation_id,
        created_at=datetime.fromisoformat(created.time),
    )
    drafts = [
        RecordDraft(
            record.payload,
            submission_id=record.submission_id,
            attempt_id=record.attempt_id,
            execution_id=record.execution_id,
            turn=record.turn,
            id=record.id,
            time=record.time,
        )
        for record in records[1:]
    ]
    if drafts:
        copied = await target.append(conversation_id, drafts, expected_seq=1, fence=0)
        assert [r.hash for r in copied] == [r.hash for r in records[1:]], "copy changed the hashes"
