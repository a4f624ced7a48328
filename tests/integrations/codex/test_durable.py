"""A Codex run made durable by ``auto_send_turn``: the converted run in a session's log
(memory and SQLite stores), its SSE stream over a real uvicorn, read again by a viewer that
reconnects and by a restarted server, and an offline replay that runs nothing."""

from collections.abc import Callable
from pathlib import Path

import pytest

from tether.engine import Runtime
from tether.integrations.codex import CodexHarness, CodexTurn, durable
from tether.journal import Journal
from tether.store import SqliteStore, Store
from tether.stream import project

from ...engine.test_runtime import settle
from ..claude_code.support import (
    CODEX_FIXTURES,
    Logical,
    Refusing,
    Sender,
    collect,
    fake_cli,
    lines,
    logical,
    runs,
    sending,
    served,
    sse,
    stream_events,
)

pytestmark = pytest.mark.timeout(90)

Make = Callable[..., Runtime]
MODEL = "gpt-5.5"


async def tap_of(name: str) -> tuple[list[Logical], CodexTurn]:
    turn = CodexTurn(lines(CODEX_FIXTURES / f"{name}.jsonl"), model=MODEL)
    return logical(await collect(turn.events)), turn


@pytest.mark.parametrize("name", ["command", "mcp", "documented", "api_error"])
async def test_the_run_lands_in_the_log_and_replays_without_the_cli(
    make_runtime: Make, store: Store, name: str
) -> None:
    said, live = await tap_of(name)
    sender = Sender(lambda: CodexTurn(lines(CODEX_FIXTURES / f"{name}.jsonl"), model=MODEL))
    async with make_runtime(sending(sender)) as runtime:
        receipt = await runtime.dispatch("tap", "me", "go")
        settled = await settle(runtime, receipt.submission_id)
    assert settled["status"] == "succeeded", settled
    records = await store.read(receipt.conversation_id)
    responses = [s for s in said if s[0] == "response"]
    assert [r.kind for r in records].count("tool_outcome") == len(responses)
    assert logical(project(records)) == said
    assert settled["result"] == [s[1] for s in said if s[0] == "text"][-1]
    assert sender.results[0].usage == live.usage()

    replaying = Sender(lambda: CodexTurn(Refusing(), model=MODEL))
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(replaying) == [settled["result"]]
    assert replaying.pulled == 0 and replaying.results == sender.results


async def test_served_streams_over_sse_to_a_viewer_that_reconnects_and_after_a_restart(
    tmp_path: Path,
) -> None:
    codex = fake_cli(tmp_path / "bin", "codex", CODEX_FIXTURES / "command.jsonl")
    said, _ = await tap_of("command")
    path = "/agents/coder/me"
    answer = "The command printed: hello from codex"
    store = await SqliteStore.open(tmp_path / "data")
    try:
        async with served({"coder": durable(executable=str(codex), model=MODEL)}, store) as server:
            settled = (
                await server.client.post(path, params={"wait": True}, json={"body": "Run echo"})
            ).json()
            assert settled["status"] == "succeeded" and settled["result"] == answer, settled
            frames = await sse(server.client, path, view="stream")
            assert frames[0].data["content"]["content"] == "Run echo"
            assert logical(stream_events(frames)) == said
            first = await sse(server.client, path, view="stream", until=lambda f: len(f) == 3)
            rest = await sse(server.client, path, view="stream", last_event_id=first[-1].id)
            assert [f.id for f in first + rest] == [f.id for f in frames]
    finally:
        await store.close()

    store = await SqliteStore.open(tmp_path / "data")
    try:
        missing = str(tmp_path / "nowhere" / "codex")
        async with served({"coder": durable(executable=missing, model=MODEL)}, store) as server:
            assert await sse(server.client, path, view="stream") == frames
            conversation = await server.runtime.conversation("coder", "me")
        journal = await Journal.open(store, conversation.id, fence=0)
        assert await journal.replay(CodexHarness(executable=missing, model=MODEL)) == [answer]
    finally:
        await store.close()
    assert len(runs(codex)) == 1  # neither the restart nor the replay ran the CLI
