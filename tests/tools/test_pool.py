"""The worker processes of the file tools: every tool answers by its deadline with a typed
error, never blocking the event loop; a worker killed, cancelled or dead is never used
again; an answer is bounded; a worker runs with none of the server's secrets, imports
nothing from its working directory, and ends when it runs out of its memory budget."""

import asyncio
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tether.tools._pool as pool_module
from tether.tools import ToolTimedOut, WorkspaceError, workspace
from tether.tools._pool import WorkerPool

from ..processes import kill, start
from .support import (
    GAP_BOUND,
    Tools,
    cpu_seconds,
    environment_of,
    eventually,
    loop_gaps,
    wait_dead,
    worker_pids,
)

STUCK = """
import pathlib, sys, time
print("ready", flush=True)
sys.stdin.readline()  # the request came
pathlib.Path(sys.argv[1]).touch()
time.sleep(600)  # and no answer: a stuck disk, a match that never ends (a _worker stand-in)
"""


@pytest.fixture
def stuck(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Workers that take a request and never answer; the file they touch once they have it."""
    took = tmp_path / "took-a-request"
    pool = WorkerPool((sys.executable, "-c", STUCK, str(took)))
    monkeypatch.setattr(pool_module, "shared_pool", lambda: pool)
    yield took
    pool.close()


@pytest.fixture
def own_pool() -> Iterator[WorkerPool]:
    pool = WorkerPool()
    yield pool
    pool.close()


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read", {"path": "a.txt"}),
    ("write", {"path": "b.txt", "content": "b"}),
    ("edit", {"path": "a.txt", "old_string": "a", "new_string": "b"}),
    ("glob", {"pattern": "*.txt"}),
    ("grep", {"pattern": "a"}),
]


@pytest.mark.parametrize(("name", "arguments"), CALLS, ids=[name for name, _ in CALLS])
async def test_every_file_tool_answers_by_its_deadline(
    root: Path, stuck: Path, name: str, arguments: dict[str, Any]
) -> None:
    (root / "a.txt").write_text("a\n")
    tools = Tools(workspace(root, tool_timeout=0.5))
    before = worker_pids()
    async with loop_gaps() as gaps:
        result = await tools.result(name, **arguments)
    assert result.is_error and result.content.startswith(
        f"{name} failed: ToolTimedOut: {name} timed out after 0.5 s and was stopped; "
    )
    assert await eventually(stuck.exists)  # the worker had the request when it was stopped
    assert max(gaps) < GAP_BOUND, f"the event loop stopped for {max(gaps):.3f} s"
    assert wait_dead(list(worker_pids() - before)) == []  # killed, not left running
    with pytest.raises(ToolTimedOut) as raised:
        await tools(name, **arguments)
    assert (raised.value.tool, raised.value.timeout, raised.value.code) == (
        name,
        0.5,
        "tool_timed_out",
    )


async def test_a_cancelled_call_kills_its_worker(root: Path, stuck: Path) -> None:
    tools = Tools(workspace(root))
    before = worker_pids()
    call = asyncio.create_task(tools("read", path="a.txt"))
    await eventually(stuck.exists)
    [pid] = worker_pids() - before
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert wait_dead([pid]) == []


async def test_a_dead_idle_worker_is_replaced(root: Path) -> None:
    (root / "a.txt").write_text("a\n")
    tools = Tools(workspace(root))
    assert await tools("read", path="a.txt") == "a\n"
    idle = worker_pids()  # the shared pool's, kept for the next call
    assert idle
    for pid in idle:
        os.kill(pid, signal.SIGKILL)
    assert wait_dead(list(idle)) == []
    assert await tools("read", path="a.txt") == "a\n"
    assert not worker_pids() & idle


def _request(root: Path, op: str, **arguments: Any) -> dict[str, Any]:
    return {
        "op": op,
        "root": os.path.realpath(root),
        "limits": [1 << 30, 1 << 20, 1 << 30, 1 << 16],
        "ignore": [],
        "memory": 1 << 30,
        "args": arguments,
    }


async def test_an_answer_over_its_limit_stops_the_worker(root: Path, own_pool: WorkerPool) -> None:
    (root / "big.txt").write_text("x" * 10_000)
    read = _request(root, "read", path="big.txt", offset=1, limit=None)
    before = worker_pids()
    assert len(await own_pool.run(read, deadline=60, answer_limit=1 << 20)) == 10_000
    [pid] = worker_pids() - before
    with pytest.raises(WorkspaceError, match="over its limit of 1000 bytes"):
        await own_pool.run(read, deadline=60, answer_limit=1000)
    assert wait_dead([pid]) == []


async def test_a_worker_that_dies_mid_call_is_reported(root: Path, own_pool: WorkerPool) -> None:
    (root / "a.txt").write_text("a" * 40 + "\n")
    grep = _request(root, "grep", pattern="(?=a)(a*)*b", path=".", glob=None, ignore_case=False)
    before = worker_pids()
    call = asyncio.create_task(own_pool.run(grep, deadline=60, answer_limit=1 << 20))
    [pid] = await eventually(lambda: worker_pids() - before)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(WorkspaceError, match=r"^the worker process (ended|closed its pipe)"):
        await call
    assert wait_dead([pid]) == []


async def test_a_worker_out_of_memory_says_so_and_ends(root: Path, own_pool: WorkerPool) -> None:
    (root / "big.txt").write_bytes(b"x" * (64 << 20))
    read = {**_request(root, "read", path="big.txt", offset=1, limit=1), "memory": 100 << 20}
    before = worker_pids()
    with pytest.raises(WorkspaceError, match="the work needed more than the worker's 100 MiB"):
        await own_pool.run(read, deadline=60, answer_limit=1 << 20)
    assert wait_dead(list(worker_pids() - before)) == []  # it ended itself after answering
    small = _request(root, "glob", pattern="*", path=".")
    assert await own_pool.run(small, deadline=60, answer_limit=1 << 20) == "big.txt"


async def test_a_worker_has_no_secrets_and_imports_nothing_from_the_working_directory(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workspace may be the server's working directory (``python -m tether serve`` puts it
    first on ``sys.path``): a ``json.py`` a model wrote there must not be what a worker
    imports, and the worker's environment holds nothing of the server's."""
    marker = tmp_path / "imported"
    (root / "json.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n")
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    monkeypatch.setenv("TETHER_TEST_SECRET", "hunter2")
    pool = WorkerPool()
    before = worker_pids()
    try:
        answer = await pool.run(
            _request(root, "glob", pattern="*.py", path="."), deadline=60, answer_limit=1 << 20
        )
        assert answer == "json.py" and not marker.exists()
        [pid] = worker_pids() - before
        assert set(environment_of(pid)) <= {"PATH", "LANG"}
    finally:
        pool.close()


SERVER = """
import asyncio, sys
from tether.tools import workspace

async def main() -> None:
    grep = {tool.name: tool for tool in workspace(sys.argv[1], tool_timeout=600)}["grep"]
    await grep.fn(pattern="(?=a)(a*)*b", path=".", glob=None, ignore_case=False)

asyncio.run(main())
"""


def test_a_worker_ends_with_its_server_even_mid_match(root: Path) -> None:
    """A server SIGKILLed while its worker runs a match that never ends: the worker would
    never read the end of its input, and ran on, orphaned, a core at 100% for good."""
    (root / "a.txt").write_text("a" * 40 + "\n")
    server = start([sys.executable, "-c", SERVER, str(root)])
    deadline = time.monotonic() + 60
    workers: set[int] = set()
    # Until the worker has run a second of CPU: past its start (0.2 s), in the match.
    while not any(cpu_seconds(pid) > 1 for pid in workers) and time.monotonic() < deadline:
        assert server.poll() is None, "the server ended"
        time.sleep(0.02)  # another process's doing: nothing here to await
        workers = worker_pids(server.pid)
    [worker] = workers
    kill(server)
    assert wait_dead([worker]) == []


def test_tool_timeout_must_be_positive(root: Path) -> None:
    with pytest.raises(ValueError, match="tool_timeout must be positive"):
        workspace(root, tool_timeout=0)
