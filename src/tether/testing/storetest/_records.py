"""Shortcuts the cases share for whole logs: open a conversation, append to it, read it
back whole as an export does, forge a record, and check that nothing of a conversation is
kept."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import JsonValue

from tether.errors import ConversationNotFound
from tether.messages import args_digest
from tether.records import (
    ApprovalRequested,
    AttachmentRef,
    Payload,
    Record,
    RecordDraft,
    UserMessage,
    format_time,
)
from tether.store import Conversation, SessionKey
from tether.testing.storetest._base import AGENT, INSTANCE, CompleteStore, Fixtures, offers

__all__ = (
    "append_all",
    "draft_at",
    "export_log",
    "forge_record",
    "gate_request",
    "nothing_of",
    "open_conversation",
    "say",
    "saying",
)


def draft_at(fx: Fixtures, at: float, payload: Payload | None = None, **kwargs: Any) -> RecordDraft:
    return RecordDraft(
        payload if payload is not None else UserMessage(body="hello"),
        id=fx.id("rec"),
        time=format_time(fx.at(at)),
        **kwargs,
    )


def saying(*refs: AttachmentRef, body: str = "look") -> UserMessage:
    return UserMessage(body=body, attachments=refs)


async def open_conversation(
    store: CompleteStore,
    cid: str,
    at: float = 0,
    *,
    session: str = "default",
    agent: str = AGENT,
    instance: str = INSTANCE,
) -> str:
    conversation, created = await store.ensure_conversation(
        SessionKey(agent, instance, session), conversation_id=cid, created_at=Fixtures.at(at)
    )
    assert created
    return conversation.id


async def append_all(
    store: CompleteStore, cid: str, *drafts: RecordDraft, fence: int = 0
) -> list[Record]:
    return await store.append(cid, list(drafts), expected_seq=await store.head(cid), fence=fence)


async def say(
    store: CompleteStore, fx: Fixtures, cid: str, at: float, *refs: AttachmentRef
) -> None:
    await append_all(store, cid, draft_at(fx, at, saying(*refs) if refs else None))


async def export_log(store: CompleteStore, cid: str) -> tuple[Conversation, list[Record]]:
    """A conversation and its whole log, as an export reads them."""
    records: list[Record] = []
    while batch := await store.read(cid, after_seq=records[-1].seq if records else 0, limit=3):
        records += batch
    return await store.get_conversation(cid), records


def gate_request(cid: str, seq: int, call: str = "call-1") -> ApprovalRequested:
    args: dict[str, JsonValue] = {"to": "bob@example.com"}
    return ApprovalRequested(
        approval_id=f"{cid}.{seq}",
        call_id=call,
        tool="mail",
        args=args,
        args_digest=args_digest(args),
    )


def forge_record(
    record: Record, *, canonical: bytes | None = None, hash: str | None = None
) -> Record:
    return Record(
        record.seq,
        record.kind,
        record.canonical if canonical is None else canonical,
        record.prev_hash,
        record.hash if hash is None else hash,
    )


async def nothing_of(store: CompleteStore, conversation: Conversation) -> None:
    """Nothing of ``conversation`` is stored."""
    with pytest.raises(ConversationNotFound):
        await store.get_conversation(conversation.id)
    with pytest.raises(ConversationNotFound):
        await store.find_conversation(conversation.key)
    with pytest.raises(ConversationNotFound):
        await store.read(conversation.id)
    if offers(store, "sessions"):
        listed = await store.list_sessions(limit=10_000)
        assert conversation.id not in [row.conversation_id for row in listed]
