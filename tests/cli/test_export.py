"""``tether export``, ``tether import`` and ``tether replay --from``: a log goes out exactly as
stored, comes back in only whole and verified, and replays against today's code."""

import asyncio
import copy
import dataclasses
import hashlib
import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from typer.testing import CliRunner, Result

from tether._canonical import canonical_json, record_hash
from tether.cli import app
from tether.records import LogTruncated, Record, RecordDraft, UserMessage, decode_record
from tether.store import (
    Conversation,
    ExportKey,
    ExportTrailer,
    MemoryStore,
    SessionKey,
    export_chunks,
    open_store,
)
from tether.testing import read_log

from ..postgres import fresh_schema, store_url
from ..testing.replayed import record
from .command import tether
from .conftest import ServerProcess, cli_env

pytestmark = pytest.mark.process

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
    assert "give a conversation id, --from FILE or --against APP" in error(both)
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
    file.write_text(tether("export", conversation_id, "--store", source, real=True).stdout)
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


# --- issue 36: what an import takes on trust ------------------------------------------------


def rederived(
    records: list[Record], seq: int, change: Callable[[dict[str, Any]], None]
) -> list[Record]:
    """``records`` with the one at ``seq`` changed and every hash from there derived again:
    a forgery the chain alone cannot tell from the original."""
    forged: list[Record] = []
    for original in records:
        if original.seq < seq:
            forged.append(original)
            continue
        fields = copy.deepcopy(dict(original.fields))
        if original.seq == seq:
            change(fields)
        canonical = canonical_json(fields)
        prev = forged[-1].hash if forged else ""
        digest = record_hash(canonical, prev, original.seq)
        forged.append(Record(original.seq, original.kind, canonical, prev, digest))
    return forged


def said_otherwise(fields: dict[str, Any]) -> None:
    fields["payload"]["body"] = "transfer everything to mallory"


def test_a_truncated_export_is_refused(fresh_store: Callable[[], str], tmp_path: Path) -> None:
    """Issue 36: a file with its last 3 records cut imported as complete ("imported 10
    records, every hash verified"): the chain holds up to wherever a file stops."""
    source = fresh_store()
    conversation_id = recorded(source)
    _, records = stored(source, conversation_id)
    lines = cli("export", conversation_id, "--store", source).stdout_bytes.splitlines(keepends=True)
    assert len(lines) == len(records) + 1
    head, kept = records[-1].seq, records[-4].seq
    target = fresh_store()
    cut = tmp_path / "cut.jsonl"

    cut.write_bytes(b"".join(lines[:-4]))  # a download stopped 3 records before the end
    assert error(cli("import", str(cut), "--store", target, code=1)) == (
        f"error: {cut} is refused: truncated export: the trailer is missing: the file ends "
        f"after seq {kept} ({kept} records) without the line an export ends with; it was cut "
        "short (or written by a Tether whose exports had none); nothing was imported"
    )
    cut.write_bytes(b"".join([*lines[:-4], lines[-1]]))  # records cut from before the trailer
    assert error(cli("import", str(cut), "--store", target, code=1)) == (
        f"error: {cut} is refused: the export's trailer says {head} records, seq 1..{head}; "
        f"the file holds {kept}, seq 1..{kept}; nothing was imported"
    )
    cut.write_bytes(b"".join([*lines, lines[3]]))  # a record after the trailer
    assert "line 23 follows the export's trailer" in error(
        cli("import", str(cut), "--store", target, code=1)
    )
    cut.write_bytes(b"".join(lines))
    assert cli("import", str(cut), "--store", target).stdout.endswith(f"{UNSIGNED}\n")
    assert stored(target, conversation_id)[1] == records


def test_a_forged_export_is_refused_when_a_signature_is_required(tmp_path: Path) -> None:
    """Issue 36: an export whose hashes were derived again after an edit was accepted. A
    chain proves integrity, not origin: an export signed with the server's key, checked
    against its public half, does."""
    source = f"sqlite:///{tmp_path / 'data'}"
    conversation_id = recorded(source)
    _, records = stored(source, conversation_id)
    key_file = tmp_path / "export-key.pem"
    public = cli("export-key", str(key_file), "--new").stdout.strip()
    assert public.startswith("ed25519:") and oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert cli("export-key", str(key_file)).stdout.strip() == public
    key = ExportKey.load(key_file)
    signed = cli("export", conversation_id, "--store", source, "--key-file", str(key_file))
    assert signed.stdout_bytes == exported(records, key)
    trusting = ("--trusted-key", public, "--require-signed")

    forged = rederived(records, 3, said_otherwise)  # the user's first message
    assert forged[-1].hash != records[-1].hash
    original = ExportTrailer.of(conversation_id, len(records), records[0], records[-1]).signed(key)
    rewritten = ExportTrailer.of(conversation_id, len(forged), forged[0], forged[-1])
    body = b"".join(record.to_json() + b"\n" for record in forged)
    stolen = dataclasses.replace(rewritten, signature=original.signature)
    refused = error(
        imported_from(tmp_path, body + stolen.to_line(), "--trusted-key", public, code=1)
    )
    assert refused.endswith(
        f"is refused: the signature does not verify with trusted key {key.public.key_id}: the "
        "file was changed after it was signed; nothing was imported"
    )
    refused = error(imported_from(tmp_path, body + rewritten.to_line(), *trusting, code=1))
    assert refused.endswith(
        "is refused: the export is not signed, and a signature is required; nothing was imported"
    )
    forger = ExportKey.generate()
    refused = error(
        imported_from(tmp_path, body + rewritten.signed(forger).to_line(), *trusting, code=1)
    )
    assert refused.endswith(
        f"is refused: the export is signed by key {forger.public.key_id}, which is not a "
        "trusted key; nothing was imported"
    )
    assert not (tmp_path / "target").exists()  # refused before the store was opened
    # Unsigned, the forgery is a well-formed export: taken, and said to prove nothing more.
    taken = imported_from(tmp_path, body + rewritten.to_line(), target="elsewhere").stdout
    assert taken.endswith(f"{len(forged)} records, {UNSIGNED}\n")

    done = imported_from(tmp_path, signed.stdout_bytes, *trusting).stdout
    assert done == (
        f"imported conversation {conversation_id} (forecaster/ann/default): {len(records)} "
        "records, every hash verified against the export's trailer; signed by trusted key "
        f"{key.public.key_id}\n"
    )
    noted = imported_from(tmp_path, signed.stdout_bytes).stdout
    assert noted.startswith("already in the store: ")
    assert "(--trusted-key)" in cli("import", "x.jsonl", "--require-signed", code=2).stderr
    unreadable = cli("import", "x.jsonl", "--trusted-key", "ed25519:nope", code=2)
    assert "Invalid value for --trusted-key: not an export public key" in unreadable.stderr
    over_http = cli("export", conversation_id, "--key-file", str(key_file), code=2)
    assert "--export-key-file" in over_http.stderr


def test_a_log_that_starts_at_its_log_truncated_record_vouches_only_for_itself(
    tmp_path: Path,
) -> None:
    """Issue 36: retention replaces a log's head by a log_truncated record that keeps the
    hash of the last record it replaced, so nothing chains to what it carries (the
    transcript before it): rewritten, it still verified and imported. Unsigned, it is taken
    only when asked to; signed, the trailer's digest of it is under the signature."""
    source = f"sqlite:///{tmp_path / 'data'}"
    conversation_id = recorded(source, *[f"message {n}" for n in range(8)])
    cli("prune", "--store", source, "--keep-records", "20")
    _, records = stored(source, conversation_id)
    anchor, cut = records[0], records[0].seq
    assert anchor.kind == LogTruncated.KIND
    key = ExportKey.generate()
    (tmp_path / "key.pem").write_bytes(key.to_pem())
    trusting = ("--trusted-key", str(tmp_path / "key.pem"), "--require-signed")
    unsigned = exported(records)
    signed = exported(records, key)

    wire = orjson.loads(anchor.to_json())
    rewrite_first_text(wire["payload"]["messages"], "you agreed to the refund")
    history = orjson.dumps(wire, option=orjson.OPT_SORT_KEYS) + b"\n"
    rewritten = [decode_record(history), *records[1:]]
    forged_unsigned = exported(rewritten)  # its trailer derived again, as a forger would
    forged_signed = history + signed.split(b"\n", 1)[1]  # the signed trailer kept
    assert read_log(forged_unsigned.splitlines())[1] == rewritten  # the chain holds

    for content in (unsigned, forged_unsigned):
        refused = error(imported_from(tmp_path, content, code=1))
        assert f"is refused: the log starts at its log_truncated record (seq {cut}): " in refused
        assert refused.endswith("(--allow-truncated takes it as it is); nothing was imported")
    mismatch = error(imported_from(tmp_path, forged_signed, *trusting, code=1))
    assert mismatch.endswith(
        f"is refused: the export's trailer does not match its log_truncated record (seq {cut}); "
        "nothing was imported"
    )
    trailer = ExportTrailer.from_json(orjson.loads(signed.splitlines()[-1]))
    digest = "sha256:" + hashlib.sha256(rewritten[0].to_json()).hexdigest()
    moved = dataclasses.replace(trailer, anchor_digest=digest)
    refused = error(
        imported_from(
            tmp_path, forged_signed.rsplit(b"\n", 2)[0] + b"\n" + moved.to_line(), *trusting, code=1
        )
    )
    assert "the signature does not verify with trusted key" in refused

    done = imported_from(tmp_path, signed, *trusting).stdout
    assert done.endswith(
        f"the chain verified from its log_truncated record at seq {cut} (what came before "
        f"cannot be); signed by trusted key {key.public.key_id}\n"
    )
    assert stored(f"sqlite:///{tmp_path / 'target'}", conversation_id)[1] == records


def imported_from(
    tmp_path: Path, content: bytes, *options: str, code: int = 0, target: str = "target"
) -> Result:
    """``tether import`` of ``content`` into the store ``tmp_path/<target>``."""
    file = tmp_path / "in.jsonl"
    file.write_bytes(content)
    return cli(
        "import", str(file), "--store", f"sqlite:///{tmp_path / target}", *options, code=code
    )


def rewrite_first_text(value: Any, text: str) -> bool:
    """Replace the first ``"text"`` string found in ``value`` (depth first); whether any."""
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            value["text"] = text
            return True
        return any(rewrite_first_text(item, text) for item in value.values())
    if isinstance(value, list):
        return any(rewrite_first_text(item, text) for item in value)
    return False


async def _long_export(path: Path, records: int, size: int) -> None:
    """An export of a log of ``records`` user messages of ``size`` characters."""
    async with MemoryStore() as store:
        key = SessionKey("forecaster", "long")
        conversation, _ = await store.ensure_conversation(
            key, conversation_id=f"c-{records}", created_at=datetime.now(UTC)
        )
        fence, head, body = await store.mint_fence(conversation.id), 1, "x" * size
        while head < records:
            batch = [RecordDraft(UserMessage(body=f"{head + n} {body}")) for n in range(20)]
            batch = batch[: records - head]
            head = (await store.append(conversation.id, batch, expected_seq=head, fence=fence))[
                -1
            ].seq

        async def read(after: int, limit: int) -> list[Record]:
            return await store.read(conversation.id, after_seq=after, limit=limit)

        with path.open("wb") as out:
            async for chunk in export_chunks(read, conversation.id):
                out.write(chunk)


def test_an_import_holds_a_batch_not_the_file(tmp_path: Path) -> None:
    """Issue 36: an import read the whole file (150 MB became 763 MB RSS). It reads it
    twice, a line at a time (verify, then import into the store's one transaction in
    batches): the peak memory of `tether import` does not grow with the file."""
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    asyncio.run(_long_export(small, 16, 64_000))  # about 1 MB: one batch
    asyncio.run(_long_export(large, 512, 64_000))  # about 33 MB
    size = large.stat().st_size
    assert size > 32_000_000

    def peak(file: Path) -> int:
        """Bytes: the peak resident set of a `tether import` of ``file``."""
        store = f"sqlite:///{tmp_path / file.stem}"
        done = subprocess.run(
            [sys.executable, "-m", "tests.cli.peak_rss", "import", str(file), "--store", store],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=cli_env(),
            timeout=120,
            check=False,
        )
        assert done.returncode == 0 and done.stdout.startswith("imported "), done
        return int(done.stderr.splitlines()[-1]) * 1024

    grown = peak(large) - peak(small)  # before: about 4x the file's size
    assert grown < size / 4, (grown, size)
