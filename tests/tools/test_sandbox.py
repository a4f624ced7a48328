"""``bash`` in its bwrap sandbox: none of the worker's secrets, files, network or processes
reach a command, nothing a command starts outlives it, and its processes, CPU time, memory
and file sizes are bounded, while the event loop (the server) goes on serving.

Each escape and each limit is one test, and each failed when ``bash`` ran unsandboxed: it
read or reached what it names. (Not the inherited descriptors and the endless loop's
timeout, which the unsandboxed tool already held; and the fork bomb was not run unsandboxed:
the process-count test shows it had no bound.) Where a test needs the worker's environment
as the kernel shows it (``/proc/<pid>/environ`` is the environment a process was started
with, not ``os.environ`` as changed since), the worker is a Python process started with the
secrets in it.

No timing is asserted: every wait is bounded, and the liveness checks ask that other work
finished while a command ran, not how fast."""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tether.tools import CommandTimedOut, SandboxLimits, SandboxUnavailable, workspace
from tether.tools._sandbox import ETC

from .support import SECRET, Tools, eventually, kill_quietly, pids_running, real, wait_gone

REPOSITORY = Path(__file__).resolve().parents[2]
CANARY = f"tether-canary-{uuid.uuid4().hex}"
SECRETS = {"OPENAI_API_KEY": CANARY, "TETHER_AUTH_TOKEN": CANARY, "TETHER_STORE": CANARY}
# A worker: the workspace tools in a Python process started with SECRETS in its environment,
# answering one bash command (argv[2], in the workspace argv[1]) on stdout.
WORKER = """
import asyncio, sys
from tests.tools.support import Tools
from tether.tools import workspace

async def main():
    result = await Tools(workspace(sys.argv[1])).result("bash", command=sys.argv[2])
    print(result.content)

asyncio.run(main())
"""


def in_worker(root: Path, command: str) -> str:
    """What ``bash`` answers ``command`` in a worker whose environment holds the secrets."""
    env = {**os.environ, **SECRETS, "PYTHONPATH": str(REPOSITORY)}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(root), command],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def token() -> Iterator[str]:
    """A word to find a test's processes by on the host; whatever still has it is killed."""
    word = f"tether-test-{uuid.uuid4().hex}"
    yield word
    kill_quietly(pids_running(word))


@dataclass
class Ticker:
    """A coroutine that ticks while the test awaits something else."""

    ticks: int = 0
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self.ticks += 1


@pytest.fixture
async def ticker() -> AsyncIterator[Ticker]:
    ticking = Ticker()
    ticking.task = asyncio.create_task(ticking._run())
    yield ticking
    ticking.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await ticking.task


@pytest.fixture
def shell(root: Path) -> Tools:
    return Tools(workspace(root, bash_timeout=30, kill_grace=0.5))


# --- the worker's secrets -----------------------------------------------------------------


def test_the_parent_s_environment_holds_none_of_the_worker_s_secrets(root: Path) -> None:
    answer = in_worker(root, "echo parent $PPID; tr '\\0' '\\n' < /proc/$PPID/environ")
    assert answer.startswith("parent ") and "PATH=" in answer
    assert CANARY not in answer


def test_no_process_s_environment_holds_the_worker_s_secrets(root: Path) -> None:
    # grep names each environ holding the canary (a cat of them all is cut at the output cap).
    answer = in_worker(root, f"grep -las {CANARY} /proc/[0-9]*/environ; ls -d /proc/[0-9]*")
    assert CANARY not in answer and "environ" not in answer, answer
    # Only the sandbox's own processes are there: its init, bash, grep, ls.
    assert "/proc/1\n" in answer and len(answer.splitlines()) < 10, answer


async def test_the_worker_s_processes_are_not_visible(shell: Tools) -> None:
    answer = await shell("bash", command=f"cat /proc/{os.getpid()}/cmdline; ls -d /proc/[0-9]*")
    assert "No such file or directory" in answer and "pytest" not in answer, answer
    assert len(answer.splitlines()) < 10, answer  # the sandbox's init, bash, ls


# --- the host's files --------------------------------------------------------------------


async def test_a_file_outside_the_workspace_cannot_be_read(
    shell: Tools, root: Path, outside: Path
) -> None:
    secret = outside / "secret.txt"
    for command in (
        f"cat {secret}",
        "cat ../outside/secret.txt",
        f"cat /proc/1/root{secret}",
        f"cd /; cat .{secret}",
        f"ln -s {secret} sym; cat sym",
        f"ls {REPOSITORY} /root /home /run /var",
    ):
        answer = await shell("bash", command=command)
        assert SECRET not in answer and "No such file or directory" in answer, (command, answer)
    # The workspace's parent holds the workspace only: its path, made for the bind.
    assert await shell("bash", command="ls -A ..") == f"{root.name}\n[exit code 0]"


async def test_a_hard_link_to_a_file_outside_cannot_be_made(
    shell: Tools, root: Path, outside: Path
) -> None:
    secret = outside / "secret.txt"
    answer = await shell("bash", command=f"ln {secret} link; ln ../outside/secret.txt link2")
    assert "No such file or directory" in answer and answer.endswith("[exit code 1]")
    assert not (root / "link").exists() and not (root / "link2").exists()
    answer = await shell("bash", command="cat link link2")
    assert SECRET not in answer


async def test_etc_holds_no_host_secrets(shell: Tools) -> None:
    answer = await shell(
        "bash", command="cat /etc/shadow /etc/ssh/ssh_host_ed25519_key; ls /etc/ssl /etc/postgresql"
    )
    assert answer.count("No such file or directory") == 4, answer
    assert "root:" in await shell("bash", command="cat /etc/passwd")
    listed = (await shell("bash", command="ls /etc")).splitlines()[:-1]
    assert listed and all(any(fnmatch.fnmatch(name, entry) for entry in ETC) for name in listed)


async def test_the_command_has_no_capabilities(shell: Tools) -> None:
    answer = await shell("bash", command="grep -E '^Cap(Prm|Eff)' /proc/self/status")
    assert [line.split()[1] for line in answer.splitlines()[:-1]] == ["0" * 16] * 2, answer
    mounted = await shell("bash", command="mkdir -p m && mount -t tmpfs none m")
    assert not mounted.endswith("[exit code 0]")


async def test_tmp_is_private_and_the_workspace_is_shared(shell: Tools, root: Path) -> None:
    name = f"tether-private-{uuid.uuid4().hex}"
    answer = await shell("bash", command=f"echo hidden > /tmp/{name}; echo kept > kept; pwd")
    assert answer == f"{real(root)}\n[exit code 0]"
    assert not (Path("/tmp") / name).exists() and (root / "kept").read_text() == "kept\n"


async def test_no_descriptor_of_the_worker_is_inherited(shell: Tools, root: Path) -> None:
    leaked = os.open(root, os.O_RDONLY)
    os.set_inheritable(leaked, True)
    try:
        answer = await shell("bash", command="cd /proc/self/fd && echo *")
    finally:
        os.close(leaked)
    assert answer == "0 1 2 3\n[exit code 0]"  # 3: the directory bash is listing


async def test_sandbox_paths_are_shown_read_only(root: Path, outside: Path) -> None:
    shell = Tools(workspace(root, sandbox_paths=[str(outside)]))
    assert SECRET in await shell("bash", command=f"cat {outside}/secret.txt")
    written = await shell("bash", command=f"echo x > {outside}/new")
    assert "Read-only file system" in written and not (outside / "new").exists()


# --- the network -------------------------------------------------------------------------


async def test_a_loopback_port_of_the_host_cannot_be_reached(shell: Tools) -> None:
    accepted = 0

    def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        answer = await shell(
            "bash",
            command=(
                f"(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo connected; python3 -c "
                f"\"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\" "
                "&& echo connected; command -v curl >/dev/null && "
                f"curl -sS --max-time 5 http://127.0.0.1:{port}/ && echo connected; true"
            ),
        )
    finally:
        server.close()
        await server.wait_closed()
    assert "connected\n" not in answer and "Connection refused" in answer
    assert accepted == 0


# --- processes: nothing outlives a call ---------------------------------------------------


async def test_a_setsid_or_nohup_daemon_does_not_outlive_the_call(shell: Tools, token: str) -> None:
    command = f"""
        setsid bash -c 'exec -a {token}-setsid sleep 300' > /dev/null 2>&1 &
        nohup bash -c 'exec -a {token}-nohup sleep 301' > /dev/null 2>&1 &
        (bash -c 'trap "" TERM HUP; exec -a {token}-orphan sleep 302' > /dev/null 2>&1 &)
        for i in $(seq 1 2000); do
            n=0
            for f in /proc/[0-9]*/cmdline; do
                IFS= read -r -d '' a < "$f" 2>/dev/null && [[ $a == {token}-* ]] && n=$((n+1))
            done
            [ $n -ge 3 ] && break
            sleep 0.01
        done
        echo daemons: $n
    """
    answer = await shell("bash", command=command)
    assert answer == "daemons: 3\n[exit code 0]"
    assert wait_gone(token) == [], "a daemon outlived the call"


async def test_a_timeout_kills_everything_in_the_sandbox(shell: Tools, token: str) -> None:
    command = f"""
        setsid bash -c 'exec -a {token}-a sleep 300' &
        (trap '' TERM; exec -a {token}-b sleep 301) &
        bash -c 'bash -c "exec -a {token}-c sleep 302" & wait' &
        echo started
        wait
    """
    with pytest.raises(CommandTimedOut, match="ran past its timeout of 2 s") as timed_out:
        await shell("bash", command=command, timeout=2)
    assert "started" in timed_out.value.output
    assert wait_gone(token) == [], "processes of the sandbox survived its timeout"


async def test_cancelling_the_call_kills_the_sandbox(shell: Tools, root: Path, token: str) -> None:
    running = asyncio.ensure_future(
        shell("bash", command=f"(exec -a {token} sleep 300) & touch started; wait")
    )
    try:
        await eventually(lambda: (root / "started").exists() and pids_running(token))
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert wait_gone(token) == []
    finally:
        running.cancel()


# --- limits --------------------------------------------------------------------------------


FORKS = """
import os, time
made = 0
try:
    for _ in range(100):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        made += 1
except OSError as exc:
    print("refused:", exc.strerror)
print("forked", made)
"""


async def test_the_number_of_processes_is_bounded(root: Path) -> None:
    shell = Tools(workspace(root, sandbox_limits=SandboxLimits(processes=16)))
    answer = await shell("bash", command=f"python3 -c '{FORKS}'")
    assert "refused: Resource temporarily unavailable" in answer, answer
    assert int(answer.split("forked ")[1].split()[0]) < 16


async def test_a_fork_bomb_ends_at_the_timeout_while_the_loop_serves(
    root: Path, token: str, ticker: Ticker
) -> None:
    bombed = Tools(workspace(root, bash_timeout=30, sandbox_limits=SandboxLimits(processes=64)))
    bomb = asyncio.ensure_future(
        bombed("bash", command=f": {token}; bomb() {{ bomb | bomb & bomb; }}; bomb", timeout=4)
    )
    other = Tools(workspace(root))
    served = await other("bash", command="echo served")  # another session's command, meanwhile
    assert served == "served\n[exit code 0]" and not bomb.done()
    with pytest.raises(CommandTimedOut):
        await bomb
    assert ticker.ticks > 1
    assert wait_gone(token) == [], "the fork bomb outlived its call"


async def test_an_endless_loop_ends_at_the_timeout_while_the_loop_serves(
    shell: Tools, token: str, ticker: Ticker
) -> None:
    loop = asyncio.ensure_future(
        shell("bash", command=f": {token}; while :; do :; done", timeout=3)
    )
    served = await shell("bash", command="echo served")
    assert served == "served\n[exit code 0]" and not loop.done()
    with pytest.raises(CommandTimedOut, match="ran past its timeout of 3 s"):
        await loop
    assert ticker.ticks > 1
    assert wait_gone(token) == []


async def test_cpu_time_is_bounded(root: Path) -> None:
    shell = Tools(workspace(root, sandbox_limits=SandboxLimits(cpu_seconds=1)))
    answer = await shell("bash", command="while :; do :; done")
    assert answer == "[no output; killed by signal SIGXCPU: over its CPU time limit of 1 s]"


async def test_memory_is_bounded(root: Path) -> None:
    shell = Tools(workspace(root, sandbox_limits=SandboxLimits(memory_bytes=256 << 20)))
    answer = await shell("bash", command="python3 -c 'bytearray(1 << 30)'")
    assert "MemoryError" in answer and answer.endswith("[exit code 1]")


async def test_file_size_is_bounded(root: Path) -> None:
    shell = Tools(workspace(root, sandbox_limits=SandboxLimits(file_bytes=1 << 20)))
    answer = await shell("bash", command="head -c 3000000 /dev/zero > big")
    assert answer.endswith("killed by signal SIGXFSZ: a file over the size limit of 1048576 bytes]")
    assert (root / "big").stat().st_size <= 1 << 20


# --- start-up --------------------------------------------------------------------------------


def test_a_machine_without_bwrap_fails_at_start_up(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap") as refused:
        workspace(root)
    assert 'sandbox="none"' in str(refused.value)
    assert "bash" not in {tool.name for tool in workspace(root, bash=False)}
    with caplog.at_level(logging.WARNING, logger="tether.tools"):
        assert "bash" in {tool.name for tool in workspace(root, sandbox="none")}
    assert "bash runs unsandboxed" in caplog.text


def test_bwrap_that_cannot_make_namespaces_fails_at_start_up(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    programs = tmp_path / "programs"
    programs.mkdir()
    fake = programs / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}:{os.environ['PATH']}")
    with pytest.raises(SandboxUnavailable, match="No permissions to create new namespace"):
        workspace(root)


def test_the_sandbox_is_said_in_the_log_once(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tether.tools"):
        workspace(root)
        workspace(root)
    said = [r.getMessage() for r in caplog.records if "bash runs in a" in r.getMessage()]
    assert len(said) == 1 and "bubblewrap" in said[0] and f"{real(root)} read-write" in said[0]


def test_bad_sandbox_settings_are_refused(root: Path) -> None:
    with pytest.raises(ValueError, match='sandbox must be "bwrap" or "none"'):
        workspace(root, sandbox="docker")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="existing absolute paths"):
        workspace(root, sandbox_paths=["relative/dir"])
    with pytest.raises(ValueError, match="processes must be positive"):
        SandboxLimits(processes=0)
    with pytest.raises(ValueError, match="a workspace at / would give"):
        workspace("/")
