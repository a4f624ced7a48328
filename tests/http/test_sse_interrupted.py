"""A server SIGKILLed mid-answer, started again on its store: in the canonical stream, as
agentex's own client reads it, the answer the crash cut is closed as interrupted and the
answer the model gives when asked again supersedes it: in a fresh slot (an agentex server
ignores an index once it is Done), with the cut message's id, so a client keeping one
message per id shows the answer once, as ``/messages`` does. Read again from the start, or
resumed with ``Last-Event-ID`` at any event, the stream is the same, live or not.
"""

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from tether.store import open_store
from tether.stream import project

from ..browser.agents import GATE
from ..cli.conftest import ServerProcess, start_server

pytest.importorskip("agentex")

from agentex import Agentex, Stream
from agentex.types import TaskMessageUpdate
from agentex.types.task_message_update import (
    StreamTaskMessageDone,
    StreamTaskMessageStart,
)

pytestmark = pytest.mark.process

APP = "tests.browser.agents:agents"
SESSION = "/agents/slow/me"
TEXT = "the quick brown fox jumps over the lazy dog"
ANSWER = f"You said: {TEXT}"
UPDATE: TypeAdapter[TaskMessageUpdate] = TypeAdapter(TaskMessageUpdate)


def wait_for_delta(url: str) -> None:
    """Follow the record stream until the first text delta is in the log (no polling)."""
    with httpx.stream("GET", f"{url}{SESSION}", params={"follow": "true"}, timeout=60) as s:
        for line in s.iter_lines():
            if line == "event: assistant_text_delta":
                return
    raise AssertionError("the stream ended before any text was streamed")


def agentex_read(url: str, last_event_id: str | None = None) -> list[object]:
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    with Agentex(base_url=url, api_key=None, max_retries=0) as client:
        stream = client.get(
            SESSION,
            cast_to=object,
            options={"params": {"view": "stream"}, "headers": headers},
            stream=True,
            stream_cls=Stream[object],
        )
        return list(stream)


def event_ids(url: str) -> list[str]:
    with httpx.stream("GET", f"{url}{SESSION}", params={"view": "stream"}, timeout=60) as s:
        return [line.removeprefix("id: ") for line in s.iter_lines() if line.startswith("id: ")]


def by_message(updates: list[TaskMessageUpdate]) -> dict[int | str, str]:
    """The agent's text as a client keeping one message per id shows it: a message goes by
    its index until an update names its ``parent_task_message.id``. No index opens twice."""
    keys: dict[int, int | str] = {}
    shown: dict[int | str, str] = {}
    for update in updates:
        assert update.index is not None
        content = getattr(update, "content", None)
        parent = update.parent_task_message
        if update.type in ("start", "full") and content is not None:
            assert update.index not in keys, f"index {update.index} opened again"
            key = keys[update.index] = update.index if parent is None else str(parent.id)
            shown[key] = getattr(content, "content", "") if content.type == "text" else ""
        elif update.type == "delta" and update.delta is not None:
            shown[keys[update.index]] += getattr(update.delta, "text_delta", None) or ""
        elif update.type == "done" and parent is not None:
            text = shown.pop(keys[update.index])
            key = keys[update.index] = str(parent.id)
            shown[key] = text
    return shown


def crash_mid_answer(tmp_path: Path) -> tuple[ServerProcess, str]:
    """The session's answer cut half-way by a SIGKILL, then settled by a second server."""
    data, log, gate = tmp_path / "data", tmp_path / "serve.log", tmp_path / "gate"
    first = start_server(data, log, "--lease", "1", app=APP, **{GATE: str(gate)})
    try:
        accepted = httpx.post(f"{first.url}{SESSION}", json={"body": TEXT}, timeout=30).json()
        wait_for_delta(first.url)  # half the answer is durable; the model waits for the gate
    finally:
        first.kill()
    gate.touch()
    second = start_server(data, log, "--lease", "1", app=APP, **{GATE: str(gate)})
    try:
        settled = httpx.get(
            f"{second.url}/submissions/{accepted['submissionId']}",
            params={"wait": "true"},
            timeout=90,
        ).json()
        assert settled["status"] == "settled", log.read_text()
        assert settled["settlement"]["status"] == "succeeded", settled
    except BaseException:
        second.stop()
        raise
    return second, accepted["conversationId"]


async def projected(store_url: str, conversation_id: str) -> list[dict[str, Any]]:
    store = await open_store(store_url)
    try:
        records = await store.read(conversation_id)
    finally:
        await store.close()
    return [e.model_dump(mode="json", exclude_none=True) for e in project(records)]


def test_a_crash_mid_answer_reads_as_one_answer_that_superseded_the_cut(tmp_path: Path) -> None:
    server, conversation_id = crash_mid_answer(tmp_path)
    try:
        whole = agentex_read(server.url)
        updates = [UPDATE.validate_python(event) for event in whole]
        assert [u.model_dump(mode="json", exclude_none=True) for u in updates] == whole
        records = httpx.get(f"{server.url}{SESSION}/records", params={"limit": 1000}).json()
        [partial] = [
            r["payload"]["message"]["parts"][-1]["text"]
            for r in records["records"]
            if r["kind"] == "assistant_message_completed" and r["payload"].get("interrupted")
        ]
        assert partial and ANSWER.startswith(partial) and partial != ANSWER

        # The cut: a done whose message is the partial as it stood, never finished.
        [cut] = [
            (n, u)
            for n, u in enumerate(updates)
            if isinstance(u, StreamTaskMessageDone) and u.parent_task_message is not None
        ]
        at, closing = cut
        message = closing.parent_task_message
        assert message is not None and message.streaming_status == "IN_PROGRESS"
        assert getattr(message.content, "content", None) == partial
        assert message.task_id == conversation_id
        # The answer asked for again takes its message id, in a fresh slot: nothing more is
        # sent to the cut index, which an agentex server would ignore.
        assert all(u.index != closing.index for u in updates[at + 1 :])
        [superseding] = [
            u
            for u in updates[at + 1 :]
            if isinstance(u, StreamTaskMessageStart) and u.parent_task_message is not None
        ]
        assert superseding.parent_task_message is not None
        assert superseding.parent_task_message.id == message.id
        assert superseding.index is not None and closing.index is not None
        assert superseding.index > closing.index
        shown = by_message(updates)
        assert [text for text in shown.values() if text.startswith("You said")] == [ANSWER]
        messages = httpx.get(f"{server.url}{SESSION}/messages").json()["messages"]
        answers = [m for m in messages if m["role"] == "assistant"]
        assert [part["text"] for m in answers for part in m["parts"]] == [ANSWER]

        # The same from the log, read again, and resumed after any event.
        assert agentex_read(server.url) == whole
        ids = event_ids(server.url)
        assert len(ids) == len(whole)
        for cut_at in range(1, len(whole)):
            resumed = agentex_read(server.url, last_event_id=ids[cut_at - 1])
            assert whole[:cut_at] + resumed == whole, cut_at
    finally:
        server.stop()
    assert asyncio.run(projected(server.store, conversation_id)) == whole
