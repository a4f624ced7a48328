"""``tether tail`` shows the subagent tree (issue 21, item 7): each child a task call spawned,
indented under the call, with what it did and how it ended."""

import asyncio
import io
import subprocess
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from rich.console import Console

from tether.cli._render import SessionRenderer, frames

from ..http.conftest import Server, serve  # noqa: F401 (the fixture)
from ..http.delegation import nested_team, team
from .command import TETHER
from .conftest import cli_env

pytestmark = pytest.mark.process

Serve = Callable[..., Any]


def _rendered(stream: str) -> str:
    out = io.StringIO()
    renderer = SessionRenderer(Console(file=out, soft_wrap=True, emoji=False))
    for frame in frames(stream.splitlines()):
        renderer.feed(frame)
    return out.getvalue()


def _record(event_id: str, seq: int, kind: str, **payload: Any) -> str:
    data = orjson.dumps({"seq": seq, "kind": kind, "payload": payload}).decode()
    return f"id: {event_id}\nevent: {kind}\ndata: {data}\n\n"


def _child(event_id: str, seq: int, kind: str, **payload: Any) -> str:
    data = {
        "kind": "child",
        "agent": "researcher",
        "parentCallId": "call-0",
        "childSubmissionId": "s-child",
        "depth": 1,
        "record": {"seq": seq, "kind": kind, "payload": payload},
    }
    return f"id: {event_id}\nevent: child\ndata: {orjson.dumps(data).decode()}\n\n"


ANSWER = {"role": "assistant", "parts": [{"type": "text", "text": "notes on tides"}]}
TREE = (
    _record("5", 5, "tool_called", tool="task", args={"agent": "researcher", "prompt": "tides"})
    + _record("6", 6, "task_spawned", agent="researcher", childSubmissionId="s-child")
    + _child("6;6=2", 2, "user_message", body="tides")
    + _child("6;6=4", 4, "assistant_text_delta", text="notes on")
    + 'event: progress\ndata: {"submissionId": "s-child", "text": "digging"}\n\n'
    + _child("6;6=5", 5, "assistant_message_completed", message=ANSWER)
    + _child("6;6=5", 5, "assistant_message_completed", message=ANSWER)  # sent twice
    + _child("6;6=7", 7, "submission_settled", status="succeeded", result="notes on tides")
    + _record("7", 7, "tool_outcome", callId="call-0", status="ok", content="notes on tides")
    + _record("8", 8, "task_finished", agent="researcher", status="succeeded", modelCalls=1)
)


def test_a_child_is_shown_under_its_task_call() -> None:
    assert _rendered(TREE).splitlines() == [
        '→ task({"agent": "researcher", "prompt": "tides"})',
        "  │ ⇢ researcher started (s-child)",
        "  │ task: tides",
        "  │ … digging",
        "  │ notes on tides",
        "  │ ✓ settled succeeded",
        "← ok: notes on tides",
        "  │ ⇠ researcher succeeded (1 model call)",
    ]


def test_a_failed_child_says_why() -> None:
    failed = _record(
        "8", 8, "task_finished", agent="researcher", status="failed", error="it timed out"
    )
    assert _rendered(failed) == "  │ ⇠ researcher failed: it timed out\n"


def test_the_last_event_id_is_where_a_reconnect_resumes() -> None:
    renderer = SessionRenderer(Console(file=io.StringIO()))
    for frame in frames(TREE.splitlines()):
        renderer.feed(frame)
    assert renderer.last_event_id == "8" and renderer.last_seq == 8


async def _tail(url: str, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        TETHER,
        "tail",
        "assistant",
        "me",
        "--url",
        url,
        *args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        async with asyncio.timeout(60):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_tail_shows_the_tree_of_a_delegating_session(serve: Serve) -> None:  # noqa: F811
    agents, settings = team("tides", "moons")
    server: Server = await serve(agents, settings=settings)
    answer = await server.client.post(
        "/agents/assistant/me", params={"wait": True}, json={"body": "ask around"}
    )
    assert answer.json()["status"] == "succeeded"
    view = await server.client.get(f"/submissions/{answer.json()['submissionId']}")
    first, second = (child["submissionId"] for child in view.json()["children"])
    lines = (await _tail(server.url)).splitlines()
    # Each call, then its child's start; the second call comes before the first child's end
    # unless that child settled before the parent read it (then its answer is in the log
    # first, as on a loaded machine).
    assert lines[:4] == [
        "",
        "user: ask around",
        '→ task({"agent": "researcher", "prompt": "tides"})',
        f"  │ ⇢ researcher started ({first})",
    ]
    moons = lines.index('→ task({"agent": "researcher", "prompt": "moons"})')
    assert lines[moons + 1] == f"  │ ⇢ researcher started ({second})"
    for prompt, child in (("tides", first), ("moons", second)):
        start = lines.index(f"  │ task: {prompt}")
        # Under a heading naming the child, unless its lines follow its start directly.
        assert lines[start - 1] in (
            f"  │ ↳ researcher {child}",
            f"  │ ⇢ researcher started ({child})",
        )
        assert lines[start + 1 : start + 3] == [f"  │ notes on {prompt}", "  │ ✓ settled succeeded"]
        assert lines[start + 3] == f"← ok: notes on {prompt}"
    assert lines.count("  │ ⇠ researcher succeeded (1 model call)") == 2
    assert lines[-1] == "✓ settled succeeded"

    flat = (await _tail(server.url, "--no-children")).splitlines()
    assert not any(line.startswith("  │ task:") for line in flat)
    assert "  │ ⇠ researcher succeeded (1 model call)" in flat  # the parent's own record


async def test_tail_indents_a_grandchild_twice(serve: Serve) -> None:  # noqa: F811
    agents, settings = nested_team()
    server: Server = await serve(agents, settings=settings)
    await server.client.post("/agents/assistant/me", params={"wait": True}, json={"body": "go"})
    lines = (await _tail(server.url)).splitlines()
    assert "  │ task: tides" in lines
    assert "  │   │ task: sources" in lines
    assert lines.index("  │   │ notes on sources") < lines.index("  │ ← ok: notes on sources")
    assert "  │   │ ⇠ librarian succeeded (1 model call)" in lines
