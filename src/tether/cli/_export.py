"""``tether export``, ``tether import``, ``tether export-key`` and ``tether replay --from``:
a conversation's log as a file of JSON lines, and back.

Each line is one record exactly as the store holds it: its canonical JSON with its
``prevHash`` and ``hash`` (what ``tether records`` prints, and ``GET
/conversations/{id}/export`` streams), and the last line is the export's trailer (the record
count, the first and head seqs, the head hash; signed with ``--key-file``, or by a server
given ``--export-key-file``). So a file verifies on its own: ``import`` reads it through,
re-deriving the whole chain and checking the trailer (and a signature, against
``--trusted-key``), before it opens the store; then reads it again into the store's one
transaction, a batch at a time. Neither pass holds the file. ``replay --from`` replays it
against today's code in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Coroutine, Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import typer
from rich.console import Console

from tether.cli._connect import DEFAULT_URL, TOKEN, connect
from tether.cli._exit import ExitCode, fail
from tether.cli._export_keys import load_export_key
from tether.cli._serve import DEFAULT_STORE_URL
from tether.cli._stores import open_store_or_fail
from tether.errors import ExportRefused, LogTampered, RecordDecodeError, SessionExists, TetherError

if TYPE_CHECKING:
    from tether.engine import AgentDefinition
    from tether.records import Record
    from tether.store import Conversation, ExportKey, ExportPublicKey, Store, VerifiedExport

__all__ = ("export", "export_key", "import_log", "read_file", "replay_file")

T = TypeVar("T")
_PAGE = 64
"""Records of the store's log read at a time to find where it parts from a file's."""
CONVERSATION = typer.Argument(help="The conversation id (records carry it).")
FILE = typer.Argument(help="A file `tether export` wrote (- reads stdin).")
URL = typer.Option(DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to ask.")
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
KEY_FILE = typer.Option(
    None,
    "--key-file",
    help="Sign the export's trailer with this Ed25519 key (a PEM file: `tether export-key "
    "--new`); with --store only (a server signs with its own --export-key-file).",
)
TRUSTED_KEY = typer.Option(
    None,
    "--trusted-key",
    help="A public key whose signature is checked (ed25519:..., or a file holding it or a "
    "PEM key); repeat for several.",
)
REQUIRE_SIGNED = typer.Option(
    False,
    "--require-signed",
    help="Refuse an export unless a --trusted-key signed it: the chain proves the file is "
    "intact, only a signature proves where it came from.",
)
ALLOW_TRUNCATED = typer.Option(
    False,
    "--allow-truncated",
    help="Take a log that starts at its log_truncated record (retention cut its head) "
    "unsigned: nothing proves what the removed records were.",
)

KEY_PATH = typer.Argument(help="The key's PEM file.")
NEW_KEY = typer.Option(
    False, "--new", help="Make a new key there (readable by you only; never overwritten)."
)


def export(
    conversation: str = CONVERSATION,
    store: str | None = FROM_STORE,
    url: str = URL,
    auth_token: str | None = TOKEN,
    key_file: Path | None = KEY_FILE,
) -> None:
    """Write a conversation's log to stdout, one record a line, exactly as stored (with its
    hashes), then the trailer that says what it holds: `tether export ID > s.jsonl`. From
    the server, or from --store."""
    out = sys.stdout.buffer
    if store is not None:
        _run(_export_local(conversation, store, out, load_export_key(key_file, "--key-file")))
    else:
        if key_file is not None:
            raise typer.BadParameter(
                "a server signs its exports with its own key (tether serve --export-key-file); "
                "--key-file signs an export read with --store",
                param_hint="--key-file",
            )
        from tether.client import error_from_response

        with connect(url, auth_token) as client:
            # Streamed as it comes (``client.export`` holds the whole log): a long log is
            # written out without being held.
            path = f"/conversations/{quote(conversation, safe='')}/export"
            with client.http.stream("GET", path) as response:
                if response.is_error:
                    response.read()
                    raise error_from_response(response.status_code, response.content)
                for chunk in response.iter_bytes():
                    out.write(chunk)
    out.flush()


async def _export_local(conversation: str, url: str, out: IO[bytes], key: ExportKey | None) -> None:
    from tether.store import export_chunks

    async with await open_store_or_fail(url, create=False) as store:
        await store.get_conversation(conversation)  # ConversationNotFound before any output

        async def read(after: int, limit: int) -> list[Record]:
            return await store.read(conversation, after_seq=after, limit=limit)

        async for chunk in export_chunks(read, conversation, key=key):
            out.write(chunk)


def import_log(
    file: str = FILE,
    store: str = INTO_STORE,
    trusted_key: list[str] | None = TRUSTED_KEY,
    require_signed: bool = REQUIRE_SIGNED,
    allow_truncated: bool = ALLOW_TRUNCATED,
) -> None:
    """Import a log `tether export` wrote. The whole file is verified before the store is
    opened (its chain, its trailer, a signature), then streamed into one commit; a broken
    file, or one that conflicts with what the store holds, is refused naming the seq, and
    the store is left as it was."""
    keys = [_trusted(key) for key in trusted_key or []]
    if require_signed and not keys:
        raise typer.BadParameter(
            "give the public key to check the signature with (--trusted-key)",
            param_hint="--require-signed",
        )
    with _local(file) as path:
        verified = _verified(
            path,
            file,
            "nothing was imported",
            keys=keys,
            require_signed=require_signed,
            allow_truncated=allow_truncated,
        )

        async def run() -> bool:
            async with await open_store_or_fail(store, create=True) as opened:
                try:
                    return await verified.import_into(opened)
                except SessionExists:
                    fail(f"{await _conflict(opened, verified)}; nothing was imported")

        created = _run(run())
    conversation, trailer = verified.conversation, verified.trailer
    what = f"conversation {conversation.id} ({conversation.key}): {trailer.records} records"
    if created:
        typer.echo(f"imported {what}, {verified.vouched()}")
    else:
        typer.echo(f"already in the store: {what}, the same log; nothing to do")


def export_key(path: Path = KEY_PATH, new: bool = NEW_KEY) -> None:
    """Print the public half of an export-signing key (what `tether import --trusted-key`
    takes); with --new, make the key first. A server signs its exports with it given
    `tether serve --export-key-file PATH`."""
    from tether.store import ExportKey

    if new:
        key = ExportKey.generate()
        try:
            key.save(path)
        except FileExistsError:
            fail(f"{path} exists: a key is never overwritten; choose another path")
        except OSError as exc:
            fail(f"cannot write {path}: {exc.strerror or exc}")
    else:
        loaded = load_export_key(path, "PATH")
        assert loaded is not None
        key = loaded
    typer.echo(str(key.public))


def _trusted(text: str) -> ExportPublicKey:
    from tether.store import ExportPublicKey

    try:
        return ExportPublicKey.load(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--trusted-key") from None


@contextlib.contextmanager
def _local(file: str) -> Iterator[Path]:
    """The file to read, twice: stdin is spooled to a temporary file first (never held)."""
    if file != "-":
        yield Path(file)
        return
    with tempfile.NamedTemporaryFile(prefix="tether-import-", suffix=".jsonl") as spool:
        shutil.copyfileobj(sys.stdin.buffer, spool)
        spool.flush()
        yield Path(spool.name)


def _verified(
    path: Path,
    name: str,
    refused: str,
    *,
    keys: list[ExportPublicKey],
    require_signed: bool,
    allow_truncated: bool,
) -> VerifiedExport:
    """The export at ``path``, read through and checked; a file that does not decode,
    verify or satisfy the policy ends the command, naming the line, seq or reason."""
    from tether.store import verify_export

    with _refusing(name, refused):
        return verify_export(
            path,
            trusted_keys=keys,
            require_signed=require_signed,
            allow_truncated=allow_truncated,
        )


def read_file(file: str, refused: str) -> tuple[Conversation, list[Record]]:
    """The conversation and verified records of an exported file (its trailer checked if it
    has one); a file that does not decode or verify ends the command, naming the line or
    seq (and saying ``refused``)."""
    from tether.testing import read_log

    with _refusing(file, refused):
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
        return read_log(data.splitlines())


@contextlib.contextmanager
def _refusing(name: str, refused: str) -> Iterator[None]:
    """End the command with one line if reading the file ``name`` fails: naming the line,
    the seq or the reason, and saying ``refused``."""
    try:
        yield
    except OSError as exc:
        fail(f"cannot read {name}: {exc.strerror or exc}")
    except LogTampered as exc:
        fail(f"{name} is broken at seq {exc.seq}: {exc.reason}; {refused}")
    except RecordDecodeError as exc:
        fail(f"{name} is not an exported log: {exc}; {refused}")
    except ExportRefused as exc:
        hint = ""
        if exc.problem == "unverifiable_anchor":
            hint = " (--allow-truncated takes it as it is)"
        fail(f"{name} is refused: {exc.reason}{hint}; {refused}")


async def _conflict(store: Store, verified: VerifiedExport) -> str:
    """Why the store refused the import: which seq differs from the log it holds under that
    id, or which conversation has that session. The file is read again alongside the
    store's log, a page at a time."""
    from tether.errors import ConversationNotFound

    conversation = verified.conversation
    try:
        await store.get_conversation(conversation.id)
    except ConversationNotFound:
        other = await store.find_conversation(conversation.key)
        return f"the session {conversation.key} is conversation {other.id} in the store"
    head = verified.trailer.head_seq
    held: list[Record] = []
    after = verified.trailer.first_seq - 1
    for record in verified.records():
        if not held:
            held = await store.read(conversation.id, after_seq=after, limit=_PAGE)
            if not held:
                return _differs(conversation.id, record.seq, head)
        kept = held.pop(0)
        after = kept.seq
        if (kept.seq, kept.hash) != (record.seq, record.hash):
            return _differs(conversation.id, min(kept.seq, record.seq), head)
    return _differs(conversation.id, head + 1, head)


def _differs(conversation_id: str, seq: int, head: int) -> str:
    if seq > head:
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
    except ExportRefused as exc:
        fail(f"refused: {exc.reason}")
    except TetherError as exc:
        fail(f"{exc.code}: {exc}")
