"""``tether export``, ``tether import`` and ``tether replay --from``: a log goes out exactly as
stored, comes back in only whole and verified, and replays against today's code."""

import asyncio
import itertools
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson
import pytest
from typer.testing import CliRunner, Result

from tether.cli import app
from tether.records import Record
from tether.store import Conversation, ExportKey, ExportTrailer, open_store

from ..postgres import fresh_schema, store_url
from ..testing.replayed import record
from .command import tether
from .conftest import ServerProcess

runner = CliRunner()
REPO = Path(__file__).parents[2]
APP = "tests.testing.replayed"
FIRST_TURN = 11
"""The seq that ends the first of the recorded forecaster's turns (its settlement)."""


def cli(*args: str, code: int = 0) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.output, result.exception)
    return result


def error(result: Result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    """A new, empty store's URL each call (no store is there yet)."""
    numbers = itertools.count()

    def fresh() -> str:
        if request.param == "postgres":
            return store_url(fresh_schema())
        return f"sqlite:///{tmp_path / f'store-{next(numbers)}'}"

    return fresh


def recorded(url: str, *messages: str) -> str:
    """A finished session of the forecaster in the store at ``url``; its conversation id."""

    async def run() -> str:
        async with await open_store(url) as store:
            return await record(store, *messages)

    return asyncio.run(run())


def stored(url: str, conversation_id: str) -> tuple[Conversation, list[Record]]:
    async def run() -> tuple[Conversation, list[Record]]:
        async with await open_store(url) as store:
            await store.verify(conversation_id)
            found = await store.get_conversation(conversation_id)
            return found, await store.read(conversation_id, limit=100_000)

    return asyncio.run(run())


def exported(records: list[Record], key: ExportKey | None = None) -> bytes:
    """The export of ``records``: a line each, then the trailer (signed by ``key``)."""
    trailer = ExportTrailer.of(records[-1].conversation_id, len(records), records[0], records[-1])
    trailer = trailer.signed(key) if key is not None else trailer
    return b"".join(record.to_json() + b"\n" for record in records) + trailer.to_line()


UNSIGNED = (
    "every hash verified against the export's trailer; unsigned: nothing proves where it came from"
)


def test_a_log_goes_out_and_comes_back_as_stored(
    fresh_store: Callable[[], str], tmp_path: Path
) -> None:
    source = fresh_store()
    conversation_id = recorded(source)
    conversation, records = stored(source, conversation_id)
    out = cli("export", conversation_id, "--store", source).stdout_bytes
    assert out == exported(records)  # one line a record: its stored bytes and its hashes
    file = tmp_path / "s.jsonl"
    file.write_bytes(out)

    target = fresh_store()
    done = cli("import", str(file), "--store", target).stdout
    assert done == (
        f"imported conversation {conversation_id} (forecaster/ann/default): "
        f"{len(records)} records, {UNSIGNED}\n"
    )
    assert stored(target, conversation_id) == (conversation, records)
    from_stdin = runner.invoke(app, ["import", "-", "--store", target], input=out)
    assert from_stdin.exit_code == 0 and "already in the store" in from_stdin.stdout
    again = cli("import", str(file), "--store", target).stdout
    assert again.startswith("already in the store: ") and "nothing to do" in again
    assert cli("export", conversation_id, "--store", target).stdout_bytes == out
    assert (
        f"ok: {len(records)} records verified"
        in cli("verify", conversation_id, "--store", target).stdout
    )
    replayed = cli("replay", conversation_id, "--app", f"{APP}:agents", "--store", target).stdout
    assert "replayed 2 executions; model and tool invocations: 0" in replayed


def test_an_unknown_conversation_or_store_is_one_line(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'data'}"
    recorded(source, "hello")
    missing = cli("export", "c-nope", "--store", source, code=1)
    assert error(missing).startswith("error: conversation_not_found: ") and not missing.stdout
    nowhere = cli("export", "c-nope", "--store", f"sqlite:///{tmp_path / 'none'}", code=6)
    assert "no store at" in error(nowhere) and not (tmp_path / "none").exists()
    unread = cli("import", str(tmp_path / "absent.jsonl"), "--store", source, code=1)
    assert "cannot read" in error(unread)


def test_a_broken_file_is_refused_naming_the_seq_and_nothing_is_written(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'data'}"
    conversation_id = recorded(source)
    _, records = stored(source, conversation_id)
    lines = exported(records).splitlines()
    target = tmp_path / "target"
    target.mkdir()

    def refused(changed: list[bytes], *, into: str = f"sqlite:///{target}") -> str:
        file = tmp_path / "broken.jsonl"
        file.write_bytes(b"\n".join(changed) + b"\n")
        return error(cli("import", str(file), "--store", into, code=1))

    edited = orjson.loads(lines[6])
    edited["payload"]["message"]["parts"][0]["text"] = "You said: goodbye"
    message = refused([*lines[:6], orjson.dumps(edited), *lines[7:]])
    assert message.endswith("is broken at seq 7: content hash mismatch; nothing was imported")
    message = refused([*lines[:2], *lines[3:]])  # a record left out
    assert "is broken at seq 3: found seq 4 where 3 belongs" in message
    message = refused([*lines[:4], b"{not json", *lines[5:]])
    assert "is not an exported log: line 5: invalid JSON" in message
    message = refused([*lines[:4], lines[4].replace(b'"seq":5', b'"seq":"5"'), *lines[5:]])
    assert "is not an exported log: line 5: seq: Input should be a valid integer" in message
    unknown = lines[4].replace(b'"kind":"', b'"kind":"future_')
    message = refused([*lines[:4], unknown, *lines[5:]])
    assert "line 5 (seq 5): kind: unknown record kind 'future_assistant_message_started'" in message
    assert list(target.iterdir()) == []  # refused before any store was opened, or created

    # Into a store that holds the very log: refused all the same, and the log is unchanged.
    message = refused([*lines[:6], orjson.dumps(edited), *lines[7:]], into=source)
    assert "seq 7" in message
    assert stored(source, conversation_id)[1] == records


def test_a_conflicting_file_is_refused_naming_the_seq(
    fresh_store: Callable[[], str], tmp_path: Path
) -> None:
    source = fresh_store()
    conversation_id = recorded(source)  # "hello", then "and tomorrow?"
    _, records = stored(source, conversation_id)
    whole, first_turn = tmp_path / "whole.jsonl", tmp_path / "first.jsonl"
    whole.write_bytes(exported(records))
    first_turn.write_bytes(exported(records[:FIRST_TURN]))

    # The store holds the whole log: the first turn alone is not it.
    message = error(cli("import", str(first_turn), "--store", source, code=1))
    assert message == (
        f"error: conversation {conversation_id} is in the store and goes on past the file's "
        f"last record: they part at seq {FIRST_TURN + 1}; nothing was imported"
    )

    # Another store took the first turn in and went on differently from there.
    other = fresh_store()
    cli("import", str(first_turn), "--store", other)
    assert recorded(other, "and in Rome?") == conversation_id
    _, theirs = stored(other, conversation_id)
    message = error(cli("import", str(whole), "--store", other, code=1))
    assert message == (
        f"error: conversation {conversation_id} is in the store and differs from the file at "
        f"seq {FIRST_TURN + 1}; nothing was imported"  # where each started its second turn
    )
    assert stored(other, conversation_id)[1] == theirs

    # A third store has a conversation of its own for the same session.
    third = fresh_store()
    own = recorded(third, "hi")
    message = error(cli("import", str(whole), "--store", third, code=1))
    assert message == (
        f"error: the session forecaster/ann/default is conversation {own} in the store; "
        "nothing was imported"
    )


def test_replay_from_a_file(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'data'}"
    conversation_id = recorded(source)
    file = tmp_path / "s.jsonl"
    file.write_bytes(cli("export", conversation_id, "--store", source).stdout_bytes)

    for target in ("agents", "RECORDED"):  # a function returning the agents, or the mapping
        same = cli("replay", "--from", str(file), "--app", f"{APP}:{target}").stdout
        assert same == (
            f"identical: 2 executions of conversation {conversation_id} (agent forecaster) "
            "replayed; model and tool invocations: 0\n"
        )
    diverged = cli("replay", "--from", str(file), "--app", f"{APP}:rome", code=1).stdout
    first, *rest = diverged.splitlines()
    assert first.startswith("diverged at seq 8 (execution 1 of 2, ")
    assert first.endswith("tool call at seq 8 differs in args")
    assert rest[0].startswith('  recorded: tool_called  tool=forecast  args={"city":"Paris"}')
    assert rest[1].startswith('  asked:    tool_called  tool=forecast  args={"city":"Rome"}')
    assert rest[2] == "  differs in: args"

    unknown = cli("replay", "--from", str(file), "--demo", code=7)
    assert error(unknown) == (
        "error: the log's agent 'forecaster' is not among the agents given (assistant, researcher)"
    )
    both = cli("replay", conversation_id, "--from", str(file), "--demo", code=2)
    assert "give a conversation id or --from FILE" in error(both)
    assert "give a conversation id" in error(cli("replay", "--demo", code=2))
    lines = file.read_bytes().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"\n".join([*lines[:3], *lines[4:]]) + b"\n")
    refused = cli("replay", "--from", str(broken), "--app", f"{APP}:agents", code=1)
    assert error(refused).endswith(
        "is broken at seq 4: found seq 5 where 4 belongs; nothing was replayed"
    )


def test_the_console_script_replays_a_file_and_exits_1_on_a_divergence(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'data'}"
    conversation_id = recorded(source, "hello")
    file = tmp_path / "s.jsonl"
    file.write_text(tether("export", conversation_id, "--store", source).stdout)
    same = tether("replay", "--from", str(file), "--app", f"{APP}:agents", cwd=REPO)
    assert same.stdout.startswith("identical: 1 execution ")
    diverged = tether("replay", "--from", str(file), "--app", f"{APP}:rome", code=1, cwd=REPO)
    assert diverged.stdout.startswith("diverged at seq 8 ") and not diverged.stderr


def test_export_and_import_through_a_server(server: ServerProcess, tmp_path: Path) -> None:
    sent = httpx.post(
        f"{server.url}/agents/assistant/me",
        params={"wait": True},
        json={"body": "what time is it?"},
        timeout=60,
    ).json()
    assert sent["status"] == "succeeded"
    conversation_id = sent["conversationId"]
    served = tether("export", conversation_id, "--url", server.url).stdout
    assert served == tether("export", conversation_id, "--store", server.store).stdout
    *lines, last = served.splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(1, len(lines) + 1))
    trailer = json.loads(last)
    assert trailer["tetherExport"] == 1 and trailer["records"] == trailer["headSeq"] == len(lines)
    file = tmp_path / "s.jsonl"
    file.write_text(served)
    target = f"sqlite:///{tmp_path / 'copy'}"
    assert tether("import", str(file), "--store", target).stdout.startswith(
        f"imported conversation {conversation_id} (assistant/me/default): {len(lines)} records"
    )
    assert tether("export", conversation_id, "--store", target).stdout == served
    same = tether("replay", "--from", str(file), "--demo")
    assert same.stdout.startswith("identical: 1 execution ")

    missing = tether("export", "c-nope", "--url", server.url, code=1)
    assert missing.error.startswith("error: 404 conversation_not_found: ") and not missing.stdout
