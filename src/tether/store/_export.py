"""Exported logs: a conversation's records as JSON lines, ended by a trailer that says what
the file holds, optionally signed.

Each line but the last is one record exactly as a store keeps it (:meth:`Record.to_json`:
its canonical JSON with ``prevHash`` and ``hash``). The last line is the **trailer**, a JSON
object no record can be mistaken for (it has ``tetherExport``, the format's version)::

    {"anchorDigest": "sha256:...", "conversationId": "...", "firstSeq": 1, "headHash": "...",
     "headSeq": 13, "records": 13, "signature": {"algorithm": "ed25519", "keyId": "...",
     "value": "..."}, "tetherExport": 1}

What each part proves:

- The hash chain proves the records are intact and in order, from the first to the last;
  it says nothing of where they end. The trailer does: a file cut short has none (``tether
  import`` refuses it: "truncated export: the trailer is missing"), and one whose tail was
  cut and its trailer rewritten to match is no longer signed.
- A chain proves integrity, not origin: anyone can edit a record and derive every hash
  again, and the trailer with them. A **signature** (Ed25519, :mod:`._export_keys`) of the
  trailer by a key the importer trusts proves who wrote the file: it covers the
  conversation id, the count, the first and head seqs, the head hash (which seals every
  record chained to it) and ``anchorDigest``.
- A log retention truncated starts at its ``log_truncated`` record, whose hash is the one of
  the last record it replaced: nothing chains to its own content (the transcript it
  carries), so it vouches only for itself. ``anchorDigest`` (the SHA-256 of its line) puts it
  under the signature; an unsigned one cannot be verified beyond it, and an import refuses
  it unless told to take it as it is (``allow_truncated``).

Reading is a stream: :func:`verify_export` goes through a file line by line (one record in
memory at a time) and :meth:`VerifiedExport.records` reads it again for the store's
transaction, so an import's memory does not grow with the file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import orjson

from tether._canonical import canonical_json
from tether._payloads import ConversationCreated, LogTruncated
from tether.errors import ExportRefused, RecordDecodeError
from tether.records import ChainVerifier, Record, decode_record
from tether.store._capabilities import StoreCapabilities, require_capability
from tether.store._export_keys import ALGORITHM, ExportKey, ExportPublicKey
from tether.store._protocol import Store
from tether.store._types import Conversation, SessionKey

__all__ = (
    "EXPORT_PAGE",
    "EXPORT_VERSION",
    "ExportSignature",
    "ExportTrailer",
    "LogWalk",
    "VerifiedExport",
    "export_chunks",
    "verify_export",
)

EXPORT_VERSION: Final = 1
"""The trailer's ``tetherExport``: a file of a later version is refused, not misread."""
EXPORT_PAGE: Final = 1000
"""Records read from the store per step of an export: one page is held at a time."""
_MARK: Final = "tetherExport"


@dataclass(frozen=True, slots=True)
class ExportSignature:
    """A trailer's signature: the key that made it (its id) and the signature, base64url."""

    key_id: str
    value: str
    algorithm: str = ALGORITHM


@dataclass(frozen=True, slots=True)
class ExportTrailer:
    """The last line of an export: what the file holds (see the module's doc).

    Example::

        trailer = ExportTrailer.of(conversation_id, count, first, last).signed(key)
        out.write(trailer.to_line())
    """

    conversation_id: str
    records: int
    first_seq: int
    head_seq: int
    head_hash: str
    anchor_digest: str | None = None
    """``sha256:<hex>`` of a leading ``log_truncated`` record's line (``None`` otherwise)."""
    signature: ExportSignature | None = None

    @classmethod
    def of(
        cls, conversation_id: str, count: int, first: Record | None, last: Record | None
    ) -> ExportTrailer:
        """The trailer of ``count`` records from ``first`` to ``last``, unsigned."""
        if first is None or last is None:
            return cls(conversation_id, 0, 0, 0, "")
        return cls(conversation_id, count, first.seq, last.seq, last.hash, _anchor_digest(first))

    def to_json(self, *, signed: bool = True) -> dict[str, Any]:
        wire: dict[str, Any] = {
            _MARK: EXPORT_VERSION,
            "conversationId": self.conversation_id,
            "records": self.records,
            "firstSeq": self.first_seq,
            "headSeq": self.head_seq,
            "headHash": self.head_hash,
        }
        if self.anchor_digest is not None:
            wire["anchorDigest"] = self.anchor_digest
        if self.signature is not None and signed:
            wire["signature"] = {
                "algorithm": self.signature.algorithm,
                "keyId": self.signature.key_id,
                "value": self.signature.value,
            }
        return wire

    def to_line(self) -> bytes:
        return canonical_json(self.to_json()) + b"\n"

    @classmethod
    def from_json(cls, wire: object) -> ExportTrailer:
        """The trailer :meth:`to_json` wrote (``ExportRefused`` for anything else)."""
        if not isinstance(wire, dict) or _MARK not in wire:
            raise ExportRefused("trailer_mismatch", "not an export trailer")
        if wire[_MARK] != EXPORT_VERSION:
            raise ExportRefused(
                "trailer_mismatch",
                f"the export is of format {wire[_MARK]!r}; this Tether reads {EXPORT_VERSION}",
            )
        try:
            signature = wire.get("signature")
            return cls(
                conversation_id=_typed(wire, "conversationId", str),
                records=_typed(wire, "records", int),
                first_seq=_typed(wire, "firstSeq", int),
                head_seq=_typed(wire, "headSeq", int),
                head_hash=_typed(wire, "headHash", str),
                anchor_digest=_typed(wire, "anchorDigest", str) if "anchorDigest" in wire else None,
                signature=None
                if signature is None
                else ExportSignature(
                    key_id=_typed(signature, "keyId", str),
                    value=_typed(signature, "value", str),
                    algorithm=_typed(signature, "algorithm", str),
                ),
            )
        except (KeyError, TypeError) as exc:
            raise ExportRefused(
                "trailer_mismatch", f"the export's trailer is malformed: {exc}"
            ) from None

    def _message(self, key_id: str) -> bytes:
        """What a signature covers: the trailer without the signature's value, with the
        algorithm and the key id (so neither can be swapped)."""
        wire = self.to_json(signed=False)
        wire["signature"] = {"algorithm": ALGORITHM, "keyId": key_id}
        return canonical_json(wire)

    def signed(self, key: ExportKey) -> ExportTrailer:
        """This trailer, signed by ``key``."""
        key_id = key.public.key_id
        value = base64.urlsafe_b64encode(key.sign(self._message(key_id))).rstrip(b"=").decode()
        return replace(self, signature=ExportSignature(key_id, value))

    def verify(self, key: ExportPublicKey) -> bool:
        """Whether the trailer carries ``key``'s valid signature."""
        signature = self.signature
        if signature is None or signature.algorithm != ALGORITHM or signature.key_id != key.key_id:
            return False
        try:
            raw = base64.urlsafe_b64decode(signature.value + "=" * (-len(signature.value) % 4))
        except (binascii.Error, ValueError):
            return False
        return key.verify(self._message(key.key_id), raw)

    def check(self, conversation_id: str, count: int, first: Record, last: Record) -> None:
        """``ExportRefused`` unless this trailer describes these records exactly."""
        if self.conversation_id != conversation_id:
            raise ExportRefused(
                "trailer_mismatch",
                f"the export's trailer names conversation {self.conversation_id}, "
                f"its records are of {conversation_id}",
            )
        said = (self.records, self.first_seq, self.head_seq)
        if said != (count, first.seq, last.seq):
            raise ExportRefused(
                "trailer_mismatch",
                f"the export's trailer says {self.records} records, seq {self.first_seq}.."
                f"{self.head_seq}; the file holds {count}, seq {first.seq}..{last.seq}",
            )
        if self.head_hash != last.hash:
            raise ExportRefused(
                "trailer_mismatch", f"the export's trailer names another hash for seq {last.seq}"
            )
        if self.anchor_digest != _anchor_digest(first):
            raise ExportRefused(
                "trailer_mismatch",
                f"the export's trailer does not match its log_truncated record (seq {first.seq})",
            )


def _typed(wire: object, key: str, kind: type[Any]) -> Any:
    if not isinstance(wire, dict):
        raise TypeError("signature: not an object")
    value = wire[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{key}: not a {kind.__name__}")
    return value


def _anchor_digest(first: Record) -> str | None:
    """The digest a trailer keeps of a leading ``log_truncated`` record: its hash is the one
    of the record it replaced, so nothing else covers its content."""
    if first.kind != LogTruncated.KIND:
        return None
    return "sha256:" + hashlib.sha256(first.to_json()).hexdigest()


# --- writing ------------------------------------------------------------------------------


async def export_chunks(
    read: Callable[[int, int], Awaitable[Sequence[Record]]],
    conversation_id: str,
    *,
    key: ExportKey | None = None,
    first_page: Sequence[Record] | None = None,
    page: int = EXPORT_PAGE,
) -> AsyncIterator[bytes]:
    """An export of ``conversation_id``, in chunks: a page of record lines each, then the
    trailer (signed by ``key``, if given). ``read(after_seq, limit)`` reads a page
    (``first_page``, if given, is the first one, read already). It ends at the first short
    page, so a log that grows meanwhile is exported up to about where it stood, and the
    trailer says where.

    Example::

        read = lambda after, limit: store.read(cid, after_seq=after, limit=limit)
        async for chunk in export_chunks(read, cid, key=key):
            out.write(chunk)
    """
    records = first_page if first_page is not None else await read(0, page)
    count, first, last = 0, None, None
    while records:
        yield b"".join(record.to_json() + b"\n" for record in records)
        count += len(records)
        first, last = first or records[0], records[-1]
        if len(records) < page:
            break
        records = await read(last.seq, page)
    trailer = ExportTrailer.of(conversation_id, count, first, last)
    yield (trailer.signed(key) if key is not None else trailer).to_line()


# --- reading ------------------------------------------------------------------------------


def _decode_line(number: int, line: bytes | str) -> Record | ExportTrailer | None:
    """One line of an export: a record (decoded and validated, its hashes as given), the
    trailer, or ``None`` for a blank line. ``RecordDecodeError`` naming the line (and the
    seq) for a line that is neither; ``ExportRefused`` for a trailer of another version."""
    if not line.strip():
        return None
    try:
        wire = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise RecordDecodeError(f"line {number}: invalid JSON: {exc}") from None
    if isinstance(wire, dict) and _MARK in wire:
        return ExportTrailer.from_json(wire)
    try:
        return decode_record(wire)
    except RecordDecodeError as exc:
        seq = wire.get("seq") if isinstance(wire, dict) else None
        where = f" (seq {seq})" if isinstance(seq, int) and not isinstance(seq, bool) else ""
        raise RecordDecodeError(f"line {number}{where}: {exc}") from None


class LogWalk:
    """Reading an export, one line at a time: :meth:`records` decodes and verifies each
    record as it goes (the chain, via :class:`ChainVerifier`), keeps how many there were from
    which to which and the conversation their ``conversation_created`` names, and checks the
    trailer at the end.

    Example::

        walk = LogWalk()
        with open("s.jsonl", "rb") as file:
            for record in walk.records(file):
                ...
        print(walk.conversation(), walk.trailer)
    """

    def __init__(self) -> None:
        self.count = 0
        self.first: Record | None = None
        self.last: Record | None = None
        self.trailer: ExportTrailer | None = None
        self._chain: ChainVerifier | None = None
        self._created: Record | None = None

    def records(
        self, lines: Iterable[bytes | str], *, require_trailer: bool = True
    ) -> Iterator[Record]:
        """The records of ``lines``, each verified as it is read: ``RecordDecodeError``
        naming the line, ``LogTampered`` naming the seq. After the last, the trailer must be
        the last line and describe them (``ExportRefused``); without ``require_trailer`` a
        file without one passes (one written before exports had trailers)."""
        for number, line in enumerate(lines, 1):
            entry = _decode_line(number, line)
            if entry is None:
                continue
            if self.trailer is not None:
                raise ExportRefused(
                    "trailer_mismatch", f"line {number} follows the export's trailer"
                )
            if isinstance(entry, ExportTrailer):
                self.trailer = entry
                continue
            self.take(entry)
            yield entry
        conversation = self.conversation()
        assert self.first is not None and self.last is not None  # conversation() found some
        if self.trailer is not None:
            self.trailer.check(conversation.id, self.count, self.first, self.last)
        elif require_trailer:
            raise ExportRefused(
                "trailer_missing",
                f"truncated export: the trailer is missing: the file ends after seq "
                f"{self.last.seq} ({self.count} records) without the line an export ends "
                "with; it was cut short (or written by a Tether whose exports had none)",
            )

    def take(self, record: Record) -> None:
        """Verify the next record (``LogTampered`` at its seq) and count it."""
        if self._chain is None:
            self._chain = ChainVerifier(record.conversation_id)
        self._chain.check(record)
        if record.kind == ConversationCreated.KIND:
            self._created = record
        elif record.kind == LogTruncated.KIND:  # retention removed it: the anchor carries it
            carried = record.payload
            assert isinstance(carried, LogTruncated)
            if carried.created is not None:
                self._created = decode_record(carried.created)
        self.first = self.first or record
        self.last = record
        self.count += 1

    @property
    def truncated(self) -> bool:
        """Whether the log starts at a ``log_truncated`` record."""
        return self.first is not None and self.first.kind == LogTruncated.KIND

    def conversation(self) -> Conversation:
        """The conversation whose log this is (its last record's), as its own
        ``conversation_created`` describes it (``RecordDecodeError`` if none does)."""
        if self.last is None:
            raise RecordDecodeError("the log holds no records")
        conversation_id = self.last.conversation_id
        record = self._created
        if record is None or record.id != conversation_id:
            raise RecordDecodeError(f"the log holds no conversation_created of {conversation_id}")
        created = record.payload
        assert isinstance(created, ConversationCreated)
        key = SessionKey(created.agent, created.instance, created.session)
        return Conversation(
            conversation_id, key, datetime.fromisoformat(record.time), created.parent
        )


def _read(path: Path, walk: LogWalk) -> Iterator[Record]:
    with path.open("rb") as file:  # iterated a line at a time
        yield from walk.records(file)


@dataclass(frozen=True, slots=True)
class VerifiedExport:
    """An export file that :func:`verify_export` read through and took: its conversation,
    its trailer, and what vouches for it."""

    path: Path
    conversation: Conversation
    trailer: ExportTrailer
    truncated: bool
    """It starts at a ``log_truncated`` record: what came before cannot be verified."""
    signed_by: ExportPublicKey | None
    """The trusted key whose signature verified (``None``: unsigned, or by a key not given)."""

    def records(self) -> Iterator[Record]:
        """Its records, read from the file again (one at a time): what
        :meth:`import_into` gives the store. ``ExportRefused`` at the end if the file no
        longer holds what was verified."""
        walk = LogWalk()
        yield from _read(self.path, walk)
        if walk.trailer != self.trailer:
            raise ExportRefused("changed", f"{self.path} changed after it was verified")

    async def import_into(self, store: Store) -> bool:
        """Import it (see ``ImportStore.import_conversation``): ``True`` if created, ``False``
        if the store holds this very log already (``StoreCapabilityMissing`` for a store
        without the ``import`` capability). Streamed: memory does not grow with the file.

        Example::

            verified = verify_export("s.jsonl", trusted_keys=[key], require_signed=True)
            await verified.import_into(store)
        """
        importer = require_capability(StoreCapabilities.of(store).imports, "import")
        return await importer.import_conversation(self.conversation, self.records())

    def vouched(self) -> str:
        """What vouches for it, for a person: the chain and the trailer, and the signature
        (or that there is none, or that it was not checked)."""
        trailer = self.trailer
        what = "every hash verified against the export's trailer"
        if self.truncated:
            what = (
                f"the chain verified from its log_truncated record at seq {trailer.first_seq} "
                "(what came before cannot be)"
            )
        if self.signed_by is not None:
            return f"{what}; signed by trusted key {self.signed_by.key_id}"
        if trailer.signature is not None:
            return f"{what}; signed by key {trailer.signature.key_id}, not checked (not trusted)"
        return f"{what}; unsigned: nothing proves where it came from"


def verify_export(
    path: str | os.PathLike[str],
    *,
    trusted_keys: Iterable[ExportPublicKey] = (),
    require_signed: bool = False,
    allow_truncated: bool = False,
) -> VerifiedExport:
    """Read an export through, line by line, and check everything an import relies on: each
    record decodes (``RecordDecodeError`` naming the line), the chain holds
    (``LogTampered`` naming the seq), and the trailer is there and describes the records;
    a signature by one of ``trusted_keys`` must verify. ``ExportRefused`` also for an
    unsigned one, or one by another key, with ``require_signed``; and for a log that starts
    at a ``log_truncated`` record unless a trusted key signed it or ``allow_truncated``.

    Example::

        verified = verify_export("s.jsonl", trusted_keys=[ExportPublicKey.load("key.pub")])
        print(verified.vouched())
    """
    trusted = {key.key_id: key for key in trusted_keys}
    if require_signed and not trusted:
        raise ValueError("require_signed needs the trusted keys to check the signature with")
    file = Path(path)
    walk = LogWalk()
    for _ in _read(file, walk):
        pass
    conversation, trailer = walk.conversation(), walk.trailer
    assert trailer is not None  # required by the walk
    signature = trailer.signature
    signed_by = trusted.get(signature.key_id) if signature is not None else None
    if signed_by is not None and not trailer.verify(signed_by):
        raise ExportRefused(
            "bad_signature",
            f"the signature does not verify with trusted key {signed_by.key_id}: "
            "the file was changed after it was signed",
        )
    if require_signed and signature is None:
        raise ExportRefused("unsigned", "the export is not signed, and a signature is required")
    if require_signed and signed_by is None:
        assert signature is not None
        raise ExportRefused(
            "untrusted_key",
            f"the export is signed by key {signature.key_id}, which is not a trusted key",
        )
    if walk.truncated and signed_by is None and not allow_truncated:
        raise ExportRefused(
            "unverifiable_anchor",
            f"the log starts at its log_truncated record (seq {trailer.first_seq}): retention "
            "removed the records before it, and that record vouches only for itself (nothing "
            "chains to what it carries); take it as it is only from a source you trust, or "
            "from an export a trusted key signed",
        )
    return VerifiedExport(file, conversation, trailer, walk.truncated, signed_by)
