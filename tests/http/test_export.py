"""``GET /conversations/{id}/export``: the whole log as JSON lines, exactly as stored, streamed
page by page, on a real uvicorn over each store."""

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tether.cli import app
from tether.errors import ExportRefused
from tether.records import Record, RecordDraft, UserMessage
from tether.store import (
    ExportKey,
    ExportTrailer,
    MemoryStore,
    SessionKey,
    Store,
    verify_export,
)
from tether.testing import read_log, replay_log

from ..testing.replayed import Forecaster, agents
from .conftest import Server

Serve = Callable[..., Any]
LONG = 2_500
"""Records of the long log: more than two of the export's pages."""


def _exported(records: list[Record], key: ExportKey | None = None) -> bytes:
    """Each record's wire form a line, then the trailer that says what they are."""
    trailer = ExportTrailer.of(records[-1].conversation_id, len(records), records[0], records[-1])
    signed = trailer if key is None else trailer.signed(key)
    return b"".join(record.to_json() + b"\n" for record in records) + signed.to_line()


async def _session(server: Server) -> str:
    receipt = await server.runtime.dispatch("forecaster", "ann", "hello")
    await server.runtime.wait(receipt.submission_id)
    return receipt.conversation_id


async def _long_log(store: Store) -> str:
    key = SessionKey("forecaster", "long")
    conversation, _ = await store.ensure_conversation(
        key, conversation_id="c-long", created_at=datetime.now(UTC)
    )
    fence, head = await store.mint_fence(conversation.id), 1
    while head < LONG:
        batch = [RecordDraft(UserMessage(body=f"message {head + n}")) for n in range(500)]
        head = (await store.append(conversation.id, batch, expected_seq=head, fence=fence))[-1].seq
    return conversation.id


async def test_the_export_is_the_log_as_stored(asgi: Serve, store: Store) -> None:
    server: Server = await asgi(agents())
    for conversation_id in (await _session(server), await _long_log(store)):
        async with server.client.stream("GET", f"/conversations/{conversation_id}/export") as got:
            assert got.status_code == 200
            assert got.headers["content-type"] == "application/x-ndjson"
            assert "content-length" not in got.headers  # streamed, not assembled first
            body = b"".join([chunk async for chunk in got.aiter_bytes()])
        records = await store.read(conversation_id, limit=10_000)
        assert body == _exported(records)
        conversation, decoded = read_log(body.splitlines())  # verifies on its own
        assert conversation == await store.get_conversation(conversation_id)
        assert decoded == records
        copy = MemoryStore()
        assert await copy.import_conversation(conversation, decoded)
        assert await copy.read(conversation_id, limit=10_000) == records


async def test_an_export_replays_against_the_code_that_recorded_it(asgi: Serve) -> None:
    server: Server = await asgi(agents())
    conversation_id = await _session(server)
    body = (await server.client.get(f"/conversations/{conversation_id}/export")).content
    _, records = read_log(body.splitlines())
    assert (await replay_log(records, agents(Forecaster()))).identical
    report = await replay_log(records, agents(Forecaster(prompt="Be verbose.")))
    assert report.divergence is not None and report.divergence.seq == 4


async def test_an_unknown_conversation_is_404(asgi: Serve) -> None:
    server: Server = await asgi(agents())
    missing = await server.client.get("/conversations/c-nope/export")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/json"
    assert missing.json()["error"]["type"] == "conversation_not_found"


async def test_tether_export_reads_a_served_store(serve: Serve, store: Store) -> None:
    server: Server = await serve(agents())
    conversation_id = await _session(server)
    runner = CliRunner()
    result = await asyncio.to_thread(
        runner.invoke, app, ["export", conversation_id, "--url", server.url]
    )
    assert result.exit_code == 0, result.output
    records = await store.read(conversation_id)
    assert result.stdout_bytes == _exported(records)
    missing = await asyncio.to_thread(runner.invoke, app, ["export", "c-nope", "--url", server.url])
    assert missing.exit_code == 1 and "404 conversation_not_found" in missing.stderr


async def test_a_server_with_an_export_key_signs_its_exports(
    asgi: Serve, store: Store, tmp_path: Path
) -> None:
    """Issue 36: a chain proves a file intact, not where it came from; the server's
    signature does, for whoever holds its public key."""
    key = ExportKey.generate()
    server: Server = await asgi(agents(), settings={"export_key": key})
    conversation_id = await _session(server)
    body = (await server.client.get(f"/conversations/{conversation_id}/export")).content
    records = await store.read(conversation_id)
    assert body == _exported(records, key)
    file = tmp_path / "s.jsonl"
    file.write_bytes(body)
    verified = verify_export(file, trusted_keys=[key.public], require_signed=True)
    assert verified.signed_by == key.public
    assert verified.trailer.signature is not None
    assert verified.trailer.signature.key_id == key.public.key_id
    copy = MemoryStore()
    assert await verified.import_into(copy)
    assert await copy.read(conversation_id) == records
    with pytest.raises(ExportRefused, match="not a trusted key") as refused:
        verify_export(file, trusted_keys=[ExportKey.generate().public], require_signed=True)
    assert refused.value.problem == "untrusted_key"
