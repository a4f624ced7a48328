"""A root worker's sandboxes count their processes in a pids cgroup each: made per call,
gone when the call returns, and swept at the next start when a killed worker left one."""

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from tether.tools import workspace
from tether.tools._cgroup import PidsCgroup, _sweep, pids_parent

from ..processes import eventually
from .support import Tools


@pytest.fixture
def parent() -> str:
    if os.geteuid() != 0:
        pytest.skip("a worker that is not root has RLIMIT_NPROC, and no cgroup")
    found = pids_parent()
    if found is None:
        pytest.skip("no pids cgroup can be made here (cgroup v1's pids, or a delegating v2)")
    return found


def ours(parent: str) -> list[str]:
    return [name for name in os.listdir(parent) if name.startswith(f"tether-bash-{os.getpid()}-")]


def made(parent: str, before: list[str], started: Path) -> tuple[list[str], str]:
    """The processes and ``pids.max`` of the one cgroup made since ``before``, once the
    command made ``started``."""
    eventually(started.exists, f"the command making {started}", seconds=20)
    [name] = set(ours(parent)) - set(before)
    cgroup = Path(parent, name)
    return (cgroup / "cgroup.procs").read_text().split(), (cgroup / "pids.max").read_text().strip()


async def test_a_call_s_cgroup_holds_its_sandbox_and_is_gone_when_it_returns(
    parent: str, root: Path
) -> None:
    shell = Tools(workspace(root))
    before = ours(parent)
    running = asyncio.ensure_future(
        shell("bash", command="touch started; while [ ! -e stop ]; do sleep 0.01; done")
    )
    try:
        procs, limit = await asyncio.to_thread(made, parent, before, root / "started")
        assert len(procs) >= 3  # bwrap, its init, bash (and the loop's sleep)
        assert limit == "258"  # the 256 processes of SandboxLimits, bwrap and its init
        (root / "stop").touch()
        assert await running == "[no output; exit code 0]"
        assert ours(parent) == before
    finally:
        (root / "stop").touch()
        await running


def test_a_dead_worker_s_cgroup_is_swept(parent: str) -> None:
    dead = subprocess.Popen(["true"])  # a pid that no longer runs
    dead.wait()
    left = os.path.join(parent, f"tether-bash-{dead.pid}-0")
    os.mkdir(left)
    live = PidsCgroup(parent, 10)  # this worker's: kept
    try:
        _sweep(parent)
        assert not os.path.exists(left) and os.path.exists(live.path)
    finally:
        live.remove()
        if os.path.exists(left):
            os.rmdir(left)
