"""Transcripts: of a log's prefixes, as a replay asks for them; and only what a provider takes."""

from __future__ import annotations

from tether.journal import Journal, transcript
from tether.journal._history import PrefixTranscripts, Transcript, messages_of
from tether.messages import Message, ToolCallPart, ToolResultPart
from tether.records import (
    AssistantMessageCompleted,
    Compaction,
    LogTruncated,
    Payload,
    Record,
    RecordDraft,
    ToolOutcome,
    UserMessage,
    seal,
)
from tether.store import MemoryStore
from tether.testing import RecordingTools

from ..fakes.provider_rules import refusal
from .harnesses import LoopHarness, journal, new_conversation, planning_model, user


async def test_prefix_transcripts_equal_a_fresh_transcript_of_each_prefix() -> None:
    store = MemoryStore()
    cid = await new_conversation(store)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    for text in ("lookup the order", "lookup it again"):
        await j.exec(LoopHarness(), [user(text)])
    records = await (await Journal.open(store, cid, fence=0)).records()
    walk = PrefixTranscripts(records)
    forward = [walk.before(index) for index in range(len(records) + 1)]
    assert forward == [transcript(records[:index]) for index in range(len(records) + 1)]
    # Asked for late, behind the walk: still that prefix's transcript, same objects.
    late = walk.before(3)
    assert late == forward[3] and all(a is b for a, b in zip(late, forward[3], strict=True))


async def test_a_record_stands_for_the_same_message_objects_every_time() -> None:
    store = MemoryStore()
    cid = await new_conversation(store)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    await j.exec(LoopHarness(), [user("lookup it")])
    records = await store.read(cid)
    first, again = messages_of(records), messages_of(records)
    assert first and all(a is b for a, b in zip(first, again, strict=True))


def _log(*payloads: Payload) -> list[Record]:
    records: list[Record] = []
    for seq, payload in enumerate(payloads, start=1):
        prev = records[-1].hash if records else ""
        records.append(
            seal(RecordDraft(payload), conversation_id="c", session="d", seq=seq, prev_hash=prev)
        )
    return records


def _asks(*call_ids: str) -> AssistantMessageCompleted:
    parts = tuple(ToolCallPart(call_id=call_id, name="lookup") for call_id in call_ids)
    return AssistantMessageCompleted(call_id="m", message=Message(role="assistant", parts=parts))


def _result(call_id: str) -> ToolOutcome:
    return ToolOutcome(call_id=call_id, content=f"result of {call_id}")


def test_a_result_that_answers_no_call_of_the_model_is_not_shown() -> None:
    """A harness's own call (a question to a person) and a second result for one call stay
    in the log and out of the transcript: a provider refuses a result that answers no call
    the model just made."""
    records = _log(
        UserMessage(body="hi"),
        _result("ask-1"),  # a question the harness asked, not the model
        _asks("a", "b"),
        _result("a"),
        _result("a"),  # answered twice
        _result("b"),
        UserMessage(body="and?"),
        _result("b"),  # answered late
    )
    shown = transcript(records)
    assert [m.role for m in shown] == ["user", "assistant", "tool", "tool", "user"]
    assert refusal(shown) is None
    view = Transcript()
    for record in records:
        view.add(record)
    assert view.message_seqs() == [1, 3, 4, 6, 7]


def test_a_compaction_that_keeps_a_result_without_its_call_shows_none() -> None:
    records = _log(
        UserMessage(body="hi"),
        _asks("a"),
        _result("a"),
        UserMessage(body="more"),
        Compaction(summary="we looked a up", first_kept_seq=3),
    )
    shown = transcript(records)
    assert [m.role for m in shown] == ["user", "user"] and refusal(shown) is None


def test_a_transcript_carried_by_an_anchor_is_shown_as_its_records_would_be() -> None:
    """A ``log_truncated`` record an older Tether wrote may carry a result that answers no
    call: taking it in shows what reading the removed records would show now."""
    orphan = Message(role="tool", parts=(ToolResultPart(call_id="ask-1", content="Ann"),))
    carried = [Message.user("hi"), orphan]
    anchor = LogTruncated(
        last_hash="h",
        truncated_at="2026-12-06T00:00:00Z",
        removed=2,
        path=[1, 2],
        parents=[None, 1],
        groups=[(1, 1), (2, 1)],
        messages=carried,
    )
    view = Transcript()
    view.add(_log(UserMessage(body="x"), anchor)[1])
    assert [m.role for m in view.messages()] == ["user"] and view.message_seqs() == [1]
    path, parents, groups = view.export()
    assert groups == [(1, 1)]
    assert Transcript.restored(path, parents, groups, view.messages()).messages() == [carried[0]]
