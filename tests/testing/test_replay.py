"""``tether.testing``'s replay of a recorded session against today's code: identical, or the
first diverging seq with what the log holds and what the code asked for."""

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from pydantic import JsonValue

from tether.errors import ExportRefused, LogTampered, RecordDecodeError
from tether.journal import Turn
from tether.messages import Message
from tether.records import Record
from tether.store import MemoryStore, SessionKey, Store
from tether.testing import ReplayReport, assert_replays, read_log, replay_log

from .replayed import Forecaster, agents, export_to, record


@pytest.fixture
async def session(tmp_path: Path) -> tuple[Path, list[Record]]:
    """A recorded two-turn session of the forecaster, exported."""
    store = MemoryStore()
    conversation_id = await record(store)
    path = await export_to(store, conversation_id, tmp_path / "session.jsonl")
    return path, await store.read(conversation_id, limit=1000)


def _seq_of(records: list[Record], kind: str, nth: int = 1) -> int:
    return [r.seq for r in records if r.kind == kind][nth - 1]


async def test_the_recorded_code_replays_identically(session: tuple[Path, list[Record]]) -> None:
    path, records = session
    report = await replay_log(path, agents(Forecaster()))  # NoModel: asking it would fail
    assert report.identical and report.divergence is None
    assert (report.executions, report.replayed) == (2, 2)
    assert report.agent == "forecaster" and report.conversation_id == records[0].conversation_id
    assert report.outputs[0] == "You said: hello / {'echo': {'city': 'Paris'}}"
    assert str(report).startswith("identical: 2 executions of conversation ")
    assert "model and tool invocations: 0" in str(report)
    # ...from the records themselves too, and with the agents given by a function
    assert (await replay_log(records, lambda: agents(Forecaster()))).identical


def test_assert_replays_passes_in_a_plain_test(tmp_path: Path) -> None:
    store = MemoryStore()
    conversation_id = asyncio.run(record(store, "hello"))
    path = asyncio.run(export_to(store, conversation_id, tmp_path / "s.jsonl"))
    report = assert_replays(path, agents(Forecaster()))
    assert report.identical and report.replayed == 1
    changed = agents(Forecaster(prompt="Answer at length."))
    with pytest.raises(AssertionError, match=r"^diverged at seq 4 \(execution 1 of 1, "):
        assert_replays(path, changed)


async def test_assert_replays_in_an_async_test_says_what_to_await(
    session: tuple[Path, list[Record]],
) -> None:
    with pytest.raises(RuntimeError, match="await replay_log"):
        assert_replays(session[0], agents(Forecaster()))


async def test_a_changed_prompt_diverges_at_the_first_model_call(
    session: tuple[Path, list[Record]],
) -> None:
    path, records = session
    report = await replay_log(path, agents(Forecaster(prompt="Answer at length.")))
    divergence = report.divergence
    assert divergence is not None and not report.identical
    seq = _seq_of(records, "model_called")
    assert divergence.seq == seq and report.replayed == 0
    assert divergence.expected is not None and divergence.got is not None
    recorded_hash = divergence.expected["payload"]["inputHash"]
    assert recorded_hash == records[seq - 1].fields["payload"]["inputHash"]
    assert divergence.got["payload"]["inputHash"] != recorded_hash
    assert divergence.request is not None and divergence.request.input_hash() != recorded_hash
    text = str(report)
    assert text.splitlines()[0].startswith(f"diverged at seq {seq} (execution 1 of 2, ")
    assert "model input hash mismatch" in text
    assert f"recorded: model_called  model=echo  inputHash={recorded_hash}" in text
    assert "differs in: inputHash" in text
    assert "[1] system 'Answer at length.'" in text and "[2] user 'hello'" in text
    assert "tools: forecast" in text
    assert "its conversation messages are the log's" in text


async def test_a_request_with_other_messages_names_the_first_that_differs(
    session: tuple[Path, list[Record]],
) -> None:
    path, records = session
    report = await replay_log(path, agents(Forecaster(history=False)))  # forgets turn one
    divergence = report.divergence
    assert divergence is not None
    assert divergence.seq == _seq_of(records, "model_called", 2)  # the second turn's call
    assert report.replayed == 1
    text = str(report)
    assert "(execution 2 of 2, " in text
    # The transcript: hello, its answer, the second message (the forecast the harness asked
    # for itself answers no call of the model's, so no model is sent it).
    assert "against the log's transcript before seq" in text and "(3 messages):" in text
    assert "the code leaves out the first 2 of them" in text


async def test_a_request_with_a_changed_message_names_it(
    session: tuple[Path, list[Record]],
) -> None:
    path, _ = session

    class Shouting(Forecaster):
        async def run(self, turn: Turn) -> JsonValue:
            turn.inputs[:] = [Message.user(m.text.upper()) for m in turn.inputs]
            return await super().run(turn)

    report = await replay_log(path, agents(Shouting()))
    text = str(report)
    assert "message 1 differs:" in text
    assert "the log has: user 'hello'" in text and "the code:    user 'HELLO'" in text


async def test_a_tool_called_with_other_args_names_them(
    session: tuple[Path, list[Record]],
) -> None:
    path, records = session
    report = await replay_log(path, agents(Forecaster(city="Rome")))
    divergence = report.divergence
    assert divergence is not None
    assert divergence.seq == _seq_of(records, "tool_called")
    assert divergence.expected is not None and divergence.got is not None
    assert divergence.expected["payload"]["args"] == {"city": "Paris"}
    assert divergence.got["payload"]["args"] == {"city": "Rome"}
    assert divergence.request is None
    text = str(report)
    assert "tool call at seq" in text and "differs in args" in text
    assert 'recorded: tool_called  tool=forecast  args={"city":"Paris"}' in text
    assert 'asked:    tool_called  tool=forecast  args={"city":"Rome"}' in text
    assert "  differs in: args" in text


async def test_a_call_past_the_recorded_effects_diverges_where_the_execution_ended(
    session: tuple[Path, list[Record]],
) -> None:
    path, records = session
    report = await replay_log(path, agents(Forecaster(extra_call=True)))
    divergence = report.divergence
    assert divergence is not None
    assert divergence.seq == _seq_of(records, "execution_ended")
    text = str(report)
    assert "beyond the recorded effects" in text
    assert "recorded: execution_ended  (the recorded execution ends here)" in text
    assert 'asked:    tool_called  tool=forecast  args={"city":"Paris"}  callId=call-2' in text


async def test_effects_left_unasked_diverge_at_the_first_of_them(
    session: tuple[Path, list[Record]],
) -> None:
    path, records = session
    report = await replay_log(path, agents(Forecaster(skip_tool=True)))
    divergence = report.divergence
    assert divergence is not None
    assert divergence.seq == _seq_of(records, "tool_called")
    assert "left: tool_called@" in str(report)
    assert "asked:    execution_ended" in str(report)


async def test_another_output_diverges_at_the_execution_end(
    session: tuple[Path, list[Record]],
) -> None:
    path, records = session
    report = await replay_log(path, agents(Forecaster(suffix="!")))
    divergence = report.divergence
    assert divergence is not None and divergence.seq == _seq_of(records, "execution_ended")
    assert "output mismatch" in str(report) and "differs in: output" in str(report)


async def test_another_harness_version_diverges_at_its_execution_start(
    session: tuple[Path, list[Record]],
) -> None:
    path, records = session
    report = await replay_log(path, agents(Forecaster(version="2")))
    divergence = report.divergence
    assert divergence is not None and divergence.seq == _seq_of(records, "execution_started")
    text = str(report)
    assert "recorded: execution_started  harness=forecaster  harnessVersion=1" in text
    assert "asked:    execution_started  harness=forecaster  harnessVersion=2" in text
    assert "differs in: harnessVersion" in text


async def test_an_agent_the_log_does_not_name_is_refused(
    session: tuple[Path, list[Record]],
) -> None:
    with pytest.raises(LookupError, match="agent 'forecaster' is not among the agents given"):
        await replay_log(session[0], {})


async def test_a_broken_file_is_refused_naming_the_seq(
    session: tuple[Path, list[Record]], tmp_path: Path
) -> None:
    path, _ = session
    lines = path.read_bytes().splitlines()
    tampered = orjson.loads(lines[2])
    tampered["time"] = "2000-01-01T00:00:00.000000Z"
    lines[2] = orjson.dumps(tampered)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(LogTampered) as refused:
        await replay_log(broken, agents(Forecaster()))
    assert refused.value.seq == 3 and refused.value.reason == "content hash mismatch"
    with pytest.raises(LogTampered, match="at seq 2: found seq 4 where 2 belongs"):
        read_log([lines[0], lines[3]])
    with pytest.raises(RecordDecodeError, match=r"^line 2 \(seq 2\): "):
        read_log([lines[0], lines[1].replace(b'"kind":"', b'"kind":"no_')])
    with pytest.raises(RecordDecodeError, match=r"^line 1: invalid JSON"):
        read_log([b"{not json"])
    with pytest.raises(RecordDecodeError, match="no records"):
        read_log([b"", b"  "])


async def test_a_log_from_any_store_replays(store: Store, tmp_path: Path) -> None:
    """Recorded on memory, SQLite or PostgreSQL: the export replays the same."""
    conversation_id = await record(store, "hello")
    path = await export_to(store, conversation_id, tmp_path / "s.jsonl")
    *lines, trailer = path.read_bytes().splitlines()
    conversation, records = read_log([*lines, trailer])
    assert conversation == await store.get_conversation(conversation_id)
    assert records == await store.read(conversation_id)
    assert (await replay_log(path, agents(Forecaster()))).identical
    assert read_log(lines) == (conversation, records)  # recorded before exports had trailers
    with pytest.raises(ExportRefused, match="trailer says"):
        read_log([*lines[:-1], trailer])


async def test_a_log_with_nothing_to_replay_fails_a_test(tmp_path: Path) -> None:
    store = MemoryStore()
    conversation, _ = await store.ensure_conversation(
        SessionKey("forecaster", "ann"), conversation_id="c-empty", created_at=datetime.now(UTC)
    )
    records = await store.read(conversation.id)
    report = await replay_log(records, agents(Forecaster()))
    assert report.identical and report.executions == 0
    assert str(report) == (
        "nothing to replay: conversation c-empty (agent forecaster) holds no completed execution"
    )
    with pytest.raises(AssertionError, match="nothing to replay"):
        await asyncio.to_thread(assert_replays, records, agents(Forecaster()))


def test_reports_are_frozen() -> None:
    report = ReplayReport("c", "a", 1, 1)
    assert replace(report, replayed=0).replayed == 0 and report.identical
