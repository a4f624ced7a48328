"""``tether export``, ``tether import`` and ``tether replay --from``: a conversation's log as a
file of JSON lines, and back.

Each line is one record exactly as the store holds it: its canonical JSON with its
``prevHash`` and ``hash`` (what ``tether records`` prints, and ``GET
/conversations/{id}/export`` streams). So a file verifies on its own: ``import`` re-derives
the whole chain before it writes anything, and ``replay --from`` replays it against today's
code in memory.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import typer
from rich.console import Console

from tether.cli import _client
from tether.cli._exit import ExitCode, fail
from tether.cli._serve import DEFAULT_STORE_URL
from tether.cli._stores import open_store_or_fail
from tether.errors import LogTampered, RecordDecodeError, SessionExists, TetherError

if TYPE_CHECKING:
    from tether.engine import AgentDefinition
    from tether.records import Record
    from tether.store import Conversation, Store

__all__ = ("export", "import_log", "read_file", "replay_file")

T = TypeVar("T")
_PAGE = 1000
CONVERSATION = typer.Argument(help="The conversation id (records carry it).")
FILE = typer.Argument(help="A file `tether export` wrote (- reads stdin).")
URL = typer.Option(_client.DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to ask.")
TOKEN = typer.Option(
    None, "--auth-token", envvar="TETHER_AUTH_TOKEN", help="The server's bearer token."
)
FROM_STORE = typer.Option(
    None,
    "--store",
    help="Read this store (sqlite:///dir, postgresql://...) instead of asking the server.",
)
INTO_STORE = typer.Option(
    DEFAULT_STORE_URL,
    "--store",
    help="The store to write (sqlite:///dir, postgresql://...); created if there is none.",
)


def export(
    conversation: str = CONVERSATION,
    store: str | None = FROM_STORE,
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Write a conversation's log to stdout, one record a line, exactly as stored (with its
    hashes): `tether export ID > s.jsonl`. From the server, or from --store."""
    out = sys.stdout.buffer
    if store is not None:
        _run(_export_local(conversation, store, out))
    else:
        with _client.connect(url, auth_token) as client:
            path = f"/conversations/{quote(conversation, safe='')}/export"
            with client.stream("GET", path) as response:
                if response.is_error:
                    response.read()
                    _client.check(response)
                for chunk in response.iter_bytes():
                    out.write(chunk)
    out.flush()


async def _export_local(conversation: str, url: str, out: IO[bytes]) -> None:
    async with await open_store_or_fail(url, create=False) as store:
        await store.get_conversation(conversation)  # ConversationNotFound before any output
        after = 0
        while page := await store.read(conversation, after_seq=after, limit=_PAGE):
            out.write(b"".join(record.to_json() + b"\n" for record in page))
            after = page[-1].seq


def import_log(file: str = FILE, store: str = INTO_STORE) -> None:
    """Import a log `tether export` wrote. Its whole chain is verified before anything is
    written; a broken file, or one that conflicts with what the store holds, is refused
    naming the seq, and the store is left as it was."""
    conversation, records = read_file(file, "nothing was imported")

    async def run() -> bool:
        async with await open_store_or_fail(store, create=True) as opened:
            try:
                return await opened.import_conversation(conversation, records)
            except SessionExists:
                fail(f"{await _conflict(opened, conversation, records)}; nothing was imported")

    created = _run(run())
    what = f"conversation {conversation.id} ({conversation.key}): {len(records)} records"
    if created:
        typer.echo(f"imported {what}, every hash verified")
    else:
        typer.echo(f"already in the store: {what}, the same log; nothing to do")


def read_file(file: str, refused: str) -> tuple[Conversation, list[Record]]:
    """The conversation and verified records of an exported file; a file that does not
    decode or verify ends the command, naming the line or seq (and saying ``refused``)."""
    from tether.testing import read_log

    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    try:
        return read_log(data.splitlines())
    except LogTampered as exc:
        fail(f"{file} is broken at seq {exc.seq}: {exc.reason}; {refused}")
    except RecordDecodeError as exc:
        fail(f"{file} is not an exported log: {exc}; {refused}")


async def _conflict(store: Store, conversation: Conversation, records: Sequence[Record]) -> str:
    """Why the store refused the import: which seq differs from the log it holds under that
    id, or which conversation has that session."""
    from tether.errors import ConversationNotFound

    try:
        await store.get_conversation(conversation.id)
    except ConversationNotFound:
        other = await store.find_conversation(conversation.key)
        return f"the session {conversation.key} is conversation {other.id} in the store"
    seq = 0
    while page := await store.read(conversation.id, after_seq=seq, limit=_PAGE):
        for held in page:
            if held.seq > len(records) or records[held.seq - 1].hash != held.hash:
                return _differs(conversation.id, held.seq, len(records))
        seq = page[-1].seq
    return _differs(conversation.id, seq + 1, len(records))


def _differs(conversation_id: str, seq: int, length: int) -> str:
    if seq > length:
        return (
            f"conversation {conversation_id} is in the store and goes on past the file's "
            f"last record: they part at seq {seq}"
        )
    return f"conversation {conversation_id} is in the store and differs from the file at seq {seq}"


def replay_file(file: str, agents: Mapping[str, AgentDefinition], console: Console) -> None:
    """Replay an exported log against ``agents`` in memory: zero model and tool calls. Prints
    "identical", or the first diverging seq with what the log holds and what the code asked
    for, and exits :attr:`ExitCode.FAILED`."""
    from tether.testing import replay_log

    _, records = read_file(file, "nothing was replayed")
    try:
        report = _run(replay_log(records, agents))
    except LookupError as exc:  # the log's agent is not among those given
        fail(str(exc), ExitCode.BAD_APP)
    except Exception as exc:  # today's code failed where the recorded run went on
        fail(f"the replay failed: {type(exc).__name__}: {exc}")
    console.print(str(report), markup=False)
    if not report.identical:
        raise typer.Exit(ExitCode.FAILED)


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coroutine)
    except LogTampered as exc:
        fail(f"refused at seq {exc.seq}: {exc.reason}")
    except TetherError as exc:
        fail(f"{exc.code}: {exc}")
