"""What the claude-code and codex tap tests share: fixtures, a logical view of a canonical
stream, fake CLI executables, a harness that auto-sends a captured run, a real uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.http import create_app
from tether.journal import Turn
from tether.store import Store
from tether.stream import (
    DataContent,
    HarnessTurn,
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolRequestDelta,
    ToolResponseContent,
    TurnResult,
    TurnUsage,
    UnifiedEmitter,
    parse_tool_arguments,
)

from ...engine.conftest import FAST

SETTLED = "submission_settled"

INTEGRATIONS = Path(__file__).resolve().parent.parent
CLAUDE_FIXTURES = INTEGRATIONS / "claude_code" / "fixtures"
CODEX_FIXTURES = INTEGRATIONS / "codex" / "fixtures"

Logical = tuple[Any, ...]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def logical(events: Iterable[StreamEvent], *, agent_only: bool = True) -> list[Logical]:
    """Each message slot of a canonical stream as what it says, in order of opening: a
    Full equals a Start with its deltas. ``("text", text)``, ``("reasoning", text)``,
    ``("request", name, call id, arguments)``, ``("response", name, call id, content,
    is_error)``; the user's own messages are left out with ``agent_only``."""
    order: list[list[Any]] = []
    open_slots: dict[int, list[Any]] = {}
    for event in events:
        if isinstance(event, StreamTaskMessageStart | StreamTaskMessageFull):
            content = event.content
            if agent_only and content.author == "user":
                continue
            if isinstance(content, DataContent) and content.data.get("kind") == SETTLED:
                continue  # how the submission ended: the log's, not the turn's
            if isinstance(content, TextContent):
                slot: list[Any] = ["text", content.content]
            elif isinstance(content, ReasoningContent):
                slot = ["reasoning", "".join([*content.summary, *(content.content or ())])]
            elif isinstance(content, ToolRequestContent):
                slot = ["request", content.name, content.tool_call_id, content.arguments, ""]
            elif isinstance(content, ToolResponseContent):
                slot = [
                    "response",
                    content.name,
                    content.tool_call_id,
                    content.content,
                    bool(content.is_error),
                ]
            else:
                slot = ["data", content.data]
            order.append(slot)
            if isinstance(event, StreamTaskMessageStart) and event.index is not None:
                open_slots[event.index] = slot
        elif isinstance(event, StreamTaskMessageDelta) and event.index in open_slots:
            slot = open_slots[event.index]
            delta = event.delta
            if isinstance(delta, TextDelta):
                slot[1] += delta.text_delta or ""
            elif isinstance(delta, ReasoningContentDelta):
                slot[1] += delta.content_delta or ""
            elif isinstance(delta, ReasoningSummaryDelta):
                slot[1] += delta.summary_delta or ""
            elif isinstance(delta, ToolRequestDelta):
                slot[4] += delta.arguments_delta or ""
    out: list[Logical] = []
    for slot in order:
        if slot[0] == "request":
            arguments = parse_tool_arguments(slot[4]) if slot[4] else slot[3]
            out.append(("request", slot[1], slot[2], arguments))
        else:
            out.append(tuple(slot))
    return out


def check_slots(events: Iterable[StreamEvent]) -> None:
    """Every slot opens once with a new index, takes deltas only while open, and is
    closed by the end."""
    seen: set[int] = set()
    open_slots: set[int] = set()
    for event in events:
        index = event.index
        assert index is not None, event
        if isinstance(event, StreamTaskMessageStart | StreamTaskMessageFull):
            assert index not in seen, f"index {index} reused"
            seen.add(index)
            if isinstance(event, StreamTaskMessageStart):
                open_slots.add(index)
        elif isinstance(event, StreamTaskMessageDelta):
            assert index in open_slots, f"a delta for slot {index}, not open"
        elif isinstance(event, StreamTaskMessageDone):
            assert index in open_slots, f"a done for slot {index}, not open"
            open_slots.discard(index)
    assert not open_slots, f"slots left open: {sorted(open_slots)}"


async def collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


# --- fake CLIs -----------------------------------------------------------------------------


def fake_cli(
    bin_dir: Path,
    name: str,
    fixture: Path | None,
    *,
    exit_code: int = 0,
    then_sleep: bool = False,
    stderr: str = "",
    environ: Sequence[str] = (),
) -> Path:
    """An executable ``bin_dir/name`` that records its arguments (one a line, to
    ``name.argv``, a run after another), its stdin (``name.stdin``), its working directory
    (``name.cwd``) and the variables ``environ`` names (``NAME=value`` lines, to
    ``name.env``), prints ``fixture``
    and exits with ``exit_code``; with ``then_sleep`` it waits instead, with a child of its
    own (whose pid goes to ``name.child``), until it is killed."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    log = bin_dir / name
    body = [
        "#!/bin/sh",
        f'for a in "$@"; do printf "%s\\n" "$a"; done >> "{log}.argv"',
        f'echo "--" >> "{log}.argv"',
        f'cat > "{log}.stdin"',
        f'echo $$ > "{log}.pid"',
        f'pwd > "{log}.cwd"',
    ]
    body += [f'echo "{variable}=${variable}" >> "{log}.env"' for variable in environ]
    if fixture is not None:
        body.append(f'cat "{fixture}"')
    if stderr:
        body.append(f"echo {json.dumps(stderr)} >&2")
    if then_sleep:
        # Written aside, then renamed: a stop between the redirect's creating the file and
        # the echo's writing it would leave an empty pid file for the test to read.
        body += [
            f'sleep 300 & echo $! > "{log}.child.new" && mv "{log}.child.new" "{log}.child"',
            "wait",
        ]
    body.append(f"exit {exit_code}")
    script = bin_dir / name
    script.write_text("\n".join(body) + "\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def paused_cli(bin_dir: Path, name: str, fixture: Path, *, after: int) -> tuple[Path, Path]:
    """A fake CLI that prints the first ``after`` lines of ``fixture``, then waits (at most
    a minute) for the returned file to exist before it prints the rest: a run caught in
    the middle."""
    script = fake_cli(bin_dir, name, None)
    go = bin_dir / f"{name}.go"
    with script.open("a") as body:
        body.write(
            f'head -n {after} "{fixture}"\n'
            f'n=0; while [ ! -e "{go}" ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done\n'
            f'tail -n +{after + 1} "{fixture}"\n'
        )
    text = script.read_text().replace("exit 0\n", "") + "exit 0\n"
    script.write_text(text)
    return script, go


def runs(script: Path) -> list[list[str]]:
    """The argument lists a fake CLI was run with, in order."""
    path = Path(f"{script}.argv")
    if not path.exists():
        return []
    out: list[list[str]] = [[]]
    for line in path.read_text().splitlines():
        if line == "--":
            out.append([])
        else:
            out[-1].append(line)
    return out[:-1]


def on_path(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def recorded(script: Path, what: str) -> str:
    """What a fake CLI left beside itself: its ``stdin``, ``pid``, ``child``, ``cwd`` or
    ``env``."""
    return Path(f"{script}.{what}").read_text()


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def wait_gone(pid: int, within: float = 30.0) -> bool:
    """Whether ``pid`` is gone within ``within`` seconds (a signalled process is reaped soon
    after, not at once): a bound, not a timing assertion."""
    deadline = time.monotonic() + within
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class Refusing:
    """A run's events that must never be read (what a replay is given)."""

    def __aiter__(self) -> Refusing:
        return self

    async def __anext__(self) -> str:
        raise AssertionError("a replay must not read the run")


# --- a harness that auto-sends one captured run per execution ------------------------------


class Sender:
    """A Tether harness whose every execution writes ``make()``'s tapped turn into the log
    with ``auto_send_turn``; ``pulled`` counts the events its turns yielded."""

    name, version = "tap-test", "1"

    def __init__(self, make: Callable[[], HarnessTurn]) -> None:
        self.make = make
        self.results: list[TurnResult] = []
        self.pulled = 0

    async def run(self, turn: Turn) -> JsonValue:
        tapped = self.make()
        counted = _Counted(tapped, self)
        result = await UnifiedEmitter().auto_send_turn(counted, turn)
        self.results.append(result)
        return result.final_text


class _Counted:
    def __init__(self, inner: HarnessTurn, sender: Sender) -> None:
        self._inner = inner
        self._sender = sender

    @property
    def events(self) -> AsyncIterator[StreamEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[StreamEvent]:
        async for event in self._inner.events:
            self._sender.pulled += 1
            yield event

    def usage(self) -> TurnUsage:
        return self._inner.usage()


def sending(sender: Sender) -> dict[str, AgentDefinition]:
    return {"tap": AgentDefinition(lambda i, e: AgentSpec(harness=sender), max_attempts=1)}


# --- a real server -------------------------------------------------------------------------


@dataclass
class Served:
    url: str
    runtime: Runtime
    client: httpx.AsyncClient


@contextlib.asynccontextmanager
async def served(agents: dict[str, Any], store: Store) -> AsyncIterator[Served]:
    """``agents`` over ``store`` behind a real uvicorn on 127.0.0.1 (an ephemeral port)."""
    runtime = Runtime(agents, store, **FAST)
    app = create_app(runtime, manage_runtime=True)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(60):  # a loaded machine starts it in seconds
            while not server.started:
                if task.done():
                    await task
                    raise AssertionError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=url, timeout=90) as client:
            yield Served(url, runtime, client)
    finally:
        server.should_exit = True
        await task
        sock.close()


@dataclass(frozen=True)
class Frame:
    id: str
    event: str
    data: dict[str, Any]


async def sse(
    client: httpx.AsyncClient,
    path: str,
    *,
    until: Callable[[list[Frame]], bool] | None = None,
    last_event_id: str | None = None,
    **params: Any,
) -> list[Frame]:
    """The frames of an SSE stream (those with data), read until ``until`` says so or the
    stream ends."""
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    frames: list[Frame] = []
    fields: dict[str, str] = {}
    async with asyncio.timeout(60):
        async with client.stream("GET", path, params=params, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            async for line in response.aiter_lines():
                if line and not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    fields[name] = value
                    continue
                if "data" in fields:
                    frames.append(
                        Frame(
                            fields.get("id", ""),
                            fields.get("event", ""),
                            json.loads(fields["data"]),
                        )
                    )
                    if until is not None and until(frames):
                        return frames
                fields = {}
    return frames


def stream_events(frames: Iterable[Frame]) -> list[StreamEvent]:
    """The canonical events of ``view=stream`` frames."""
    from pydantic import TypeAdapter

    adapter: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)
    return [adapter.validate_python(frame.data) for frame in frames]
