"""The record envelope, its typed payloads, sealing and decoding."""

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether._canonical import canonical_json, record_hash
from tether.errors import LogTampered, RecordDecodeError
from tether.messages import Mediation, Message, Usage
from tether.records import (
    PAYLOAD_TYPES,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    AssistantMessageStarted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    AttachmentRef,
    BudgetDecided,
    BudgetRequested,
    Compaction,
    ConversationCreated,
    ConversationParent,
    ExecutionEnded,
    ExecutionFailed,
    ExecutionStarted,
    InputAnswered,
    InputRequested,
    LogTruncated,
    ModelCalled,
    PatchMarked,
    Payload,
    Record,
    RecordDraft,
    Signal,
    SteerReceived,
    StepRecorded,
    SubmissionSettled,
    TaskFinished,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
    UserMessage,
    VersionChanged,
    decode_record,
    seal,
    verify_chain,
)

DIGEST = "sha256:" + "ab" * 32
SAMPLES: list[Payload] = [
    ConversationCreated(
        agent="a",
        instance="i",
        session="s",
        parent=ConversationParent(conversation_id="c0", seq=3, reason="fork"),
    ),
    UserMessage(
        body="hi", attachments=(AttachmentRef(digest=DIGEST, media_type="image/png", size=3),)
    ),
    Signal(type="webhook", body="{}", sender={"system": "crm"}, tag="t1"),
    ExecutionStarted(
        harness="builtin",
        harness_version="1",
        input_count=1,
        config={"temperature": 0.5},
        version="v1",
        pins={"system": "ab" * 32, "tools": {"send": "cd" * 32}, "model": "openai:gpt-4.1"},
    ),
    ModelCalled(call_id="m1", model="local:echo", input_hash="ff" * 32),
    AssistantMessageStarted(call_id="m1", model="local:echo"),
    AssistantTextDelta(call_id="m1", text="he"),
    AssistantThinkingDelta(call_id="m1", text="hmm"),
    AssistantMessageCompleted(
        call_id="m1",
        message={
            "role": "assistant",
            "parts": [{"type": "thinking", "text": "t", "signature": "c2ln"}],
        },
        usage=Usage(input_tokens=3, output_tokens=0),
        finish_reason="stop",
    ),
    ToolCalled(
        call_id="t1",
        tool="send_email",
        args={"to": "x@y"},
        idempotency_key="e1:t1",
        mediation=Mediation.APPROVAL,
    ),
    ApprovalRequested(
        approval_id="ap1", call_id="t1", tool="send_email", args={"to": "x@y"}, args_digest="d"
    ),
    ApprovalDecided(
        approval_id="ap1", call_id="t1", decision="edit", args={"to": "z@y"}, approver="ann"
    ),
    InputRequested(
        input_id="c.9",
        call_id="q1",
        tool="ask",
        args={},
        prompt="Which address?",
        answer_schema={"type": "string"},
    ),
    InputAnswered(input_id="c.9", call_id="q1", value={"to": "ann@example.com"}, responder="ann"),
    BudgetRequested(
        gate_id="c.11",
        limit="modelCalls",
        used=5,
        max=5,
        spent={"modelCalls": 5, "tokens": 3120, "costUsd": None},
        budget={"modelCalls": 5},
        scope="session",
    ),
    BudgetDecided(gate_id="c.11", decision="approve", extension={"modelCalls": 3}, approver="ann"),
    ToolOutcome(call_id="t1", content="sent", data={"id": 7}, status="ok"),
    StepRecorded(call_id="t1", name="lookup", value=[1, "two", None]),
    SteerReceived(body="faster", mode="steer"),
    Compaction(summary="so far", first_kept_seq=4, reason="manual"),
    TaskSpawned(
        call_id="t2",
        agent="researcher",
        instance="i",
        session="task-1",
        child_conversation_id="c9",
        child_submission_id="s9",
    ),
    TaskFinished(
        call_id="t2",
        child_conversation_id="c9",
        child_submission_id="s9",
        status="succeeded",
        result="ok",
    ),
    ExecutionEnded(output="done"),
    ExecutionFailed(error="rate limited", error_code="provider_transient", transient=True),
    SubmissionSettled(status="succeeded", result={"answer": 42}),
    VersionChanged(
        from_version="v1",
        to_version="v2",
        reason="upgrade",
        diverged_at=4,
        differs=("system prompt", "tool schema: send"),
    ),
    PatchMarked(patch_id="confirm-first"),
    LogTruncated(
        last_hash="ab" * 32,
        truncated_at="2026-12-02T00:00:00.000000Z",
        removed=9,
        path=[1, 4],
        parents=[None, 1],
        groups=[(4, 1)],
        messages=[Message.user("hi")],
        fork_seq=0,
        usage=Usage(input_tokens=3),
        model_calls=1,
    ),
]


def test_every_kind_has_a_sample() -> None:
    assert {type(p).KIND for p in SAMPLES} == set(PAYLOAD_TYPES)


@pytest.mark.parametrize("payload", SAMPLES, ids=lambda p: type(p).KIND)
def test_every_kind_round_trips_through_json(payload: Payload) -> None:
    draft = RecordDraft(payload, submission_id="s1", attempt_id="a1", execution_id="e1", turn=1)
    record = seal(draft, conversation_id="c1", session="default", seq=2, prev_hash="00" * 32)
    wire = orjson.loads(record.to_json())
    assert wire["kind"] == payload.KIND and wire["seq"] == 2 and wire["conversationId"] == "c1"
    assert "prevHash" in wire and "hash" in wire
    decoded = decode_record(record.to_json())
    assert decoded == record
    assert decoded.payload == payload
    assert decode_record(wire).to_json() == record.to_json()


def test_wire_names_are_camel_case() -> None:
    record = seal(
        RecordDraft(SAMPLES[9], submission_id="s"),
        conversation_id="c",
        session="d",
        seq=1,
        prev_hash="",
    )
    wire = orjson.loads(record.to_json())
    assert set(wire) >= {"conversationId", "submissionId", "prevHash", "hash"}
    assert set(wire["payload"]) == {"callId", "tool", "args", "idempotencyKey", "mediation"}
    assert "attemptId" not in wire  # absent optionals are omitted, never null


def _wire(**changes: Any) -> dict[str, Any]:
    record = seal(
        RecordDraft(UserMessage(body="x")), conversation_id="c", session="d", seq=1, prev_hash=""
    )
    wire: dict[str, Any] = orjson.loads(record.to_json())
    for key, value in changes.items():
        if value is ...:
            del wire[key]
        else:
            wire[key] = value
    return wire


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (_wire(kind="no_such_kind"), "kind"),
        (_wire(payload={"body": 3}), "payload.body"),
        (_wire(payload={}), "payload.body"),
        (_wire(payload={"body": "x", "extra": 1}), "payload.extra"),
        (_wire(seq="1"), "seq"),
        (_wire(seq=0), "seq"),
        (_wire(conversationId=...), "conversationId"),
        (_wire(time="yesterday"), "time"),
        (_wire(surprise=True), "surprise"),
        (_wire(turn=-1), "turn"),
    ],
)
def test_decode_errors_name_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(RecordDecodeError) as caught:
        decode_record(data)
    assert caught.value.field == field
    assert field in str(caught.value)


@pytest.mark.parametrize("text", [b"not json", b"[1, 2]", b'"str"', b"{"])
def test_decode_rejects_non_objects(text: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        decode_record(text)


def test_payloads_are_frozen() -> None:
    message = UserMessage(body="x")
    with pytest.raises(ValueError, match="frozen"):
        message.body = "y"  # type: ignore[misc]


def test_lazy_fields_decode_from_the_stored_bytes() -> None:
    sealed = seal(
        RecordDraft(UserMessage(body="x"), turn=3),
        conversation_id="c",
        session="d",
        seq=1,
        prev_hash="",
    )
    stored = Record(sealed.seq, sealed.kind, sealed.canonical, sealed.prev_hash, sealed.hash)
    assert stored == sealed and stored.turn == 3 and stored.payload == UserMessage(body="x")
    assert stored.to_wire() == orjson.loads(stored.to_json())


def _chain(count: int) -> list[Record]:
    records: list[Record] = []
    for seq in range(1, count + 1):
        prev = records[-1].hash if records else ""
        records.append(
            seal(
                RecordDraft(UserMessage(body=str(seq))),
                conversation_id="c",
                session="d",
                seq=seq,
                prev_hash=prev,
            )
        )
    return records


def test_verify_chain_accepts_an_intact_chain() -> None:
    assert verify_chain("c", _chain(5)) == 5


@pytest.mark.parametrize(
    ("breakage", "seq"),
    [
        ("drop", 3),
        ("prev", 4),
        ("hash", 2),
        ("body", 5),
        ("garbage", 1),
    ],
)
def test_verify_chain_names_the_first_bad_seq(breakage: str, seq: int) -> None:
    records = _chain(6)
    r = records[seq - 1]
    if breakage == "drop":
        del records[seq - 1]
    elif breakage == "prev":
        records[seq - 1] = Record(r.seq, r.kind, r.canonical, "00" * 32, r.hash)
    elif breakage == "hash":
        records[seq - 1] = Record(r.seq, r.kind, r.canonical, r.prev_hash, "00" * 32)
    elif breakage == "body":
        records[seq - 1] = Record(
            r.seq, r.kind, r.canonical.replace(b'"body":"5"', b'"body":"6"'), r.prev_hash, r.hash
        )
    else:
        records[seq - 1] = Record(r.seq, r.kind, b"{not json", r.prev_hash, r.hash)
    with pytest.raises(LogTampered) as caught:
        verify_chain("c", records)
    assert caught.value.seq == seq


def test_record_ids_are_standard_ulids() -> None:
    from ulid import ULID

    from tether._ids import new_ulid

    ids = [new_ulid() for _ in range(1000)]
    assert len(set(ids)) == 1000
    for value in ids[:50]:
        assert str(ULID.from_str(value)) == value and len(value) == 26
    assert abs(ULID.from_str(ids[0]).timestamp - ULID().timestamp) < 5


TEXT = st.text(max_size=12)


@given(
    text=TEXT,
    sub=st.none() | TEXT,
    att=st.none() | TEXT,
    ex=st.none() | TEXT,
    turn=st.none() | st.integers(0, 2**60),
    seq=st.integers(1, 2**40),
    session=TEXT,
    data=st.none()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.dictionaries(TEXT, TEXT, max_size=3),
)
def test_sealed_bytes_are_the_canonical_json_of_the_envelope(
    text: str,
    sub: str | None,
    att: str | None,
    ex: str | None,
    turn: int | None,
    seq: int,
    session: str,
    data: Any,
) -> None:
    draft = RecordDraft(
        ToolOutcome(call_id=text, content=text, data=data),
        submission_id=sub,
        attempt_id=att,
        execution_id=ex,
        turn=turn,
        id=text or "x",
    )
    record = seal(draft, conversation_id=text, session=session, seq=seq, prev_hash="ab")
    fields = {
        "seq": seq,
        "id": draft.id,
        "kind": "tool_outcome",
        "conversationId": text,
        "session": session,
        "time": draft.time,
        "payload": draft.payload.to_json_object(),
        "submissionId": sub,
        "attemptId": att,
        "executionId": ex,
        "turn": turn,
    }
    expected = canonical_json({key: value for key, value in fields.items() if value is not None})
    assert record.canonical == expected
    assert record.hash == record_hash(expected, "ab", seq)
    stored = Record(seq, record.kind, record.canonical, "ab", record.hash)
    assert record._leading() == stored._leading()  # what sealing knew, as decoding finds it


@pytest.mark.parametrize("payload", SAMPLES, ids=lambda p: type(p).KIND)
def test_every_kind_decodes_from_its_stored_bytes(payload: Payload) -> None:
    draft = RecordDraft(payload, submission_id="s1", execution_id="e1", turn=1)
    sealed = seal(draft, conversation_id="c1", session="default", seq=2, prev_hash="")
    stored = Record(sealed.seq, sealed.kind, sealed.canonical, sealed.prev_hash, sealed.hash)
    assert stored.payload == payload and stored.execution_id == "e1"


# Strings that look like the envelope's own keys: the payload is found in the stored bytes
# without decoding them, so no string may be taken for a key.
TRICKY = st.sampled_from(
    ['","payload":{"x":1},"seq":9,"', ',"seq":', ',"payload":', "\\", '"kind":"user_message"']
) | st.text(max_size=12)


@given(
    text=TRICKY,
    session=TRICKY,
    ex=st.none() | TRICKY,
    data=st.none() | st.dictionaries(TRICKY, TRICKY, max_size=3),
)
def test_a_payload_read_from_the_stored_bytes_equals_the_decoded_one(
    text: str, session: str, ex: str | None, data: Any
) -> None:
    payload = ToolOutcome(call_id=text or "c", content=text, data=data)
    draft = RecordDraft(payload, execution_id=ex, submission_id=text or None, id=text or "x")
    sealed = seal(draft, conversation_id=text or "c", session=session or "d", seq=3, prev_hash="")
    stored = Record(sealed.seq, sealed.kind, sealed.canonical, sealed.prev_hash, sealed.hash)
    assert stored.payload == payload
    assert (stored.id, stored.execution_id, stored.attempt_id) == (draft.id, ex, None)
    assert stored._fields is None  # neither needed the whole envelope decoded
    decoded = Record(sealed.seq, sealed.kind, sealed.canonical, sealed.prev_hash, sealed.hash)
    assert decoded.fields["payload"] == payload.to_json_object()  # the reference path agrees
    assert (decoded.id, decoded.execution_id, decoded.submission_id) == (draft.id, ex, text or None)


def test_a_malformed_stored_payload_names_its_field() -> None:
    body = (
        b'{"conversationId":"c","id":"x","kind":"tool_outcome","payload":{"callId":5,'
        b'"content":"ok"},"seq":1,"session":"d","time":"2026-01-01T00:00:00.000000Z"}'
    )
    stored = Record(1, "tool_outcome", body, "", "h")
    with pytest.raises(RecordDecodeError) as caught:
        stored.payload  # noqa: B018
    assert caught.value.field == "payload.callId"
    assert stored.session == "d"


def _anchored_log() -> tuple[list[Record], list[Record]]:
    """Records 1..4 of a chain, and the same with the first three replaced by the anchor at 3."""
    chain: list[Record] = []
    for seq in range(1, 5):
        prev = chain[-1].hash if chain else ""
        chain.append(
            seal(
                RecordDraft(UserMessage(body=str(seq))),
                conversation_id="c",
                session="d",
                seq=seq,
                prev_hash=prev,
            )
        )
    payload = SAMPLES[-1].model_copy(update={"last_hash": chain[2].hash, "removed": 3})
    sealed = seal(RecordDraft(payload), conversation_id="c", session="d", seq=3, prev_hash="x")
    anchor = Record(3, sealed.kind, sealed.canonical, chain[2].prev_hash, chain[2].hash)
    return chain, [anchor, chain[3]]


def test_a_truncated_chain_verifies_from_its_anchor() -> None:
    chain, log = _anchored_log()
    assert verify_chain("c", log) == 4
    forged = Record(3, log[0].kind, log[0].canonical, log[0].prev_hash, "ab" * 32)
    with pytest.raises(LogTampered, match="does not hold its hash") as broken:
        verify_chain("c", [forged, log[1]])
    assert broken.value.seq == 3
    with pytest.raises(LogTampered, match="inside the log") as inside:
        verify_chain("c", [chain[0], log[0]])
    assert inside.value.seq == 3


def test_an_unversioned_start_is_written_as_before() -> None:
    """An execution run without a version writes the start an older Tether wrote: old logs
    decode, and hash, the same."""
    start = ExecutionStarted(harness="builtin", harness_version="1", input_count=1)
    assert start.to_json_object() == {"harness": "builtin", "harnessVersion": "1", "inputCount": 1}
    pinned = start.model_copy(update={"version": "v2", "pins": {"model": "m"}})
    assert pinned.to_json_object()["version"] == "v2"
    assert pinned.to_json_object()["pins"] == {"model": "m"}
