"""A Claude Code run made durable by ``auto_send_turn``: the converted run in a session's log
(memory and SQLite stores), its SSE stream over a real uvicorn, read again by a viewer that
reconnects and by a restarted server, and an offline replay that runs nothing."""

from collections.abc import Callable
from pathlib import Path

import pytest

from tether.engine import Runtime
from tether.integrations.claude_code import ClaudeCodeHarness, ClaudeCodeTurn, durable
from tether.journal import Journal
from tether.store import SqliteStore, Store
from tether.stream import project

from ...engine.test_runtime import settle
from .support import (
    CLAUDE_FIXTURES,
    Frame,
    Logical,
    Refusing,
    Sender,
    collect,
    fake_cli,
    lines,
    logical,
    paused_cli,
    runs,
    sending,
    served,
    sse,
    stream_events,
)

pytestmark = pytest.mark.timeout(90)

Make = Callable[..., Runtime]
MODEL = "claude-sonnet-4-5"


def merged(said: list[Logical]) -> list[Logical]:
    """Adjacent texts (and reasoning) as one: what one journaled message projects as."""
    out: list[Logical] = []
    for item in said:
        if out and item[0] in ("text", "reasoning") and out[-1][0] == item[0]:
            out[-1] = (item[0], out[-1][1] + item[1])
        else:
            out.append(item)
    return out


async def tap_of(name: str) -> tuple[list[Logical], ClaudeCodeTurn]:
    turn = ClaudeCodeTurn(lines(CLAUDE_FIXTURES / f"{name}.jsonl"), model=MODEL)
    return logical(await collect(turn.events)), turn


@pytest.mark.parametrize("name", ["tool", "partial", "subagent", "interrupted", "terminated"])
async def test_the_run_lands_in_the_log_and_replays_without_the_cli(
    make_runtime: Make, store: Store, name: str
) -> None:
    said, live = await tap_of(name)
    sender = Sender(lambda: ClaudeCodeTurn(lines(CLAUDE_FIXTURES / f"{name}.jsonl"), model=MODEL))
    async with make_runtime(sending(sender)) as runtime:
        receipt = await runtime.dispatch("tap", "me", "go")
        settled = await settle(runtime, receipt.submission_id)
    assert settled["status"] == "succeeded", settled
    records = await store.read(receipt.conversation_id)
    kinds = [r.kind for r in records]
    responses = [s for s in said if s[0] == "response"]
    assert kinds.count("tool_outcome") == len(responses)
    assert "assistant_text_delta" in kinds  # the text streamed as it was written
    assert merged(logical(project(records))) == merged(said)
    texts = [s[1] for s in said if s[0] == "text"]
    assert settled["result"] == texts[-1]
    assert sender.results[0].usage == live.usage()  # read once the run was exhausted

    replaying = Sender(lambda: ClaudeCodeTurn(Refusing(), model=MODEL))
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(replaying) == [settled["result"]]
    assert replaying.pulled == 0 and replaying.results == sender.results


async def test_served_streams_over_sse_to_a_viewer_that_reconnects_and_after_a_restart(
    tmp_path: Path,
) -> None:
    claude = fake_cli(tmp_path / "bin", "claude", CLAUDE_FIXTURES / "partial.jsonl")
    said, _ = await tap_of("partial")
    path = "/agents/coder/me"
    store = await SqliteStore.open(tmp_path / "data")
    try:
        async with served({"coder": durable(executable=str(claude))}, store) as server:
            settled = (
                await server.client.post(path, params={"wait": True}, json={"body": "Run echo"})
            ).json()
            assert settled["status"] == "succeeded", settled
            assert settled["result"] == "The command printed: hello from bash"
            frames = await sse(server.client, path, view="stream")
            assert frames[0].data["content"] == {
                "type": "text",
                "author": "user",
                "content": "Run echo",
                "format": "plain",
                "style": "static",
            }
            assert logical(stream_events(frames)) == said
            # A viewer that drops after a few events and comes back misses and repeats nothing.
            first = await sse(server.client, path, view="stream", until=lambda f: len(f) == 7)
            rest = await sse(server.client, path, view="stream", last_event_id=first[-1].id)
            assert [f.id for f in first + rest] == [f.id for f in frames]
    finally:
        await store.close()
    assert len(runs(claude)) == 1

    # A new server on the same store, with no CLI at all: the session's stream is the same.
    store = await SqliteStore.open(tmp_path / "data")
    try:
        missing = str(tmp_path / "nowhere" / "claude")
        async with served({"coder": durable(executable=missing)}, store) as server:
            again: list[Frame] = await sse(server.client, path, view="stream")
            assert again == frames
            conversation = await server.runtime.conversation("coder", "me")
        journal = await Journal.open(store, conversation.id, fence=0)
        replayed = await journal.replay(ClaudeCodeHarness(executable=missing))
        assert replayed == ["The command printed: hello from bash"]
    finally:
        await store.close()
    assert len(runs(claude)) == 1  # neither the restart nor the replay ran the CLI


async def test_the_run_streams_over_sse_while_the_cli_is_still_writing(tmp_path: Path) -> None:
    partial = CLAUDE_FIXTURES / "partial.jsonl"
    said, _ = await tap_of("partial")
    # The CLI stops after the Bash call's result, before the model's answer: what was
    # written up to the tool's result is durable (a report commits what is held behind).
    claude, go = paused_cli(tmp_path / "bin", "claude", partial, after=31)
    path = "/agents/coder/me"
    store = await SqliteStore.open(tmp_path / "data")
    try:
        async with served({"coder": durable(executable=str(claude))}, store) as server:
            accepted = (await server.client.post(path, json={"body": "Run echo"})).json()

            def streaming(frames: list[Frame]) -> bool:
                return any(f.data.get("content", {}).get("type") == "tool_response" for f in frames)

            early = await sse(server.client, path, view="stream", follow=True, until=streaming)
            # The CLI has not gone on: what the viewer saw was streamed from the log mid-run.
            assert not go.exists()
            assert logical(stream_events(early)) == said[:4]
            submission = await server.runtime.submission(accepted["submissionId"])
            assert submission.status.value == "running"
            go.touch()
            settled = await settle(server.runtime, accepted["submissionId"])
            assert settled["result"] == "The command printed: hello from bash"
            frames = await sse(server.client, path, view="stream")
            assert [f.id for f in frames[: len(early)]] == [f.id for f in early]
    finally:
        await store.close()
