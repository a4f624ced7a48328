"""``bash``: its own process group, killed whole on timeout (children and grandchildren, and
those ignoring SIGTERM); a scrubbed environment; an output cap; output streamed as progress.

The process-group tests run unsandboxed (``sandbox="none"``), where the group is all that
ends a command's processes and the pids a command writes are the host's; in the sandbox the
PID namespace ends them too (``test_sandbox.py``). The others run in the sandbox.

No timing is asserted: every wait is bounded, and a process counts as dead once it is gone
or a zombie (an orphan's reaper may take its time)."""

import asyncio
import os
from pathlib import Path
from typing import Literal

import pytest

from tether.messages import Mediation
from tether.tools import CommandTimedOut, workspace
from tether.tools._sandbox import SANDBOX_PATH

from .support import Recorder, Tools, kill_quietly, pids_in, real, wait_dead


@pytest.fixture
def shell(root: Path) -> Tools:
    return Tools(workspace(root, bash_timeout=30, kill_grace=0.5))


@pytest.fixture
def unconfined(root: Path) -> Tools:
    return Tools(workspace(root, bash_timeout=30, kill_grace=0.5, sandbox="none"))


async def test_a_command_runs_in_the_root_and_reports_its_exit(shell: Tools, root: Path) -> None:
    answer = await shell("bash", command="pwd; echo out; echo err >&2; exit 3")
    assert answer == f"{real(root)}\nout\nerr\n[exit code 3]"
    assert await shell("bash", command="cat; echo stdin was empty") == (
        "stdin was empty\n[exit code 0]"
    )
    assert await shell("bash", command="true") == "[no output; exit code 0]"
    assert await shell("bash", command="printf 'no newline'") == "no newline\n[exit code 0]"
    assert (await shell("bash", command="kill -SEGV $$")).endswith("killed by signal SIGSEGV]")
    result = await shell.result("bash", command="echo a\x00b")
    assert result.is_error and "NUL byte" in result.content


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
async def test_the_environment_is_scrubbed(
    root: Path, monkeypatch: pytest.MonkeyPatch, sandbox: Literal["bwrap", "none"]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-hunter2")
    monkeypatch.setenv("TETHER_TEST_TOKEN", "hunter3")
    shell = Tools(workspace(root, bash_env={"EXTRA": "given"}, sandbox=sandbox))
    listing = await shell("bash", command="env")
    assert "hunter" not in listing
    variables = dict(line.split("=", 1) for line in listing.splitlines()[:-1])
    # What bash adds itself (PWD, SHLVL, _) besides the allowlist and what was given.
    assert set(variables) == {"PATH", "HOME", "LANG", "TERM", "EXTRA", "PWD", "SHLVL", "_"}
    assert variables["HOME"] == real(root) and variables["EXTRA"] == "given"
    # The sandbox's PATH names what it holds; unsandboxed, the worker's is passed on.
    path = SANDBOX_PATH if sandbox == "bwrap" else os.environ["PATH"]
    assert variables["PATH"] == path and variables["LANG"] == "C.UTF-8"


async def test_a_timeout_kills_the_whole_group(unconfined: Tools, root: Path) -> None:
    """Children, a grandchild, and a child that ignores SIGTERM: none survives."""
    command = """
        echo $$ >> pids
        sleep 300 & echo $! >> pids
        (trap '' TERM; exec sleep 301) & echo $! >> pids
        bash -c 'sleep 302 & echo $! >> pids; wait' & echo $! >> pids
        for i in $(seq 1 200); do [ "$(wc -l < pids)" -ge 5 ] && break; sleep 0.01; done
        echo started
        wait
    """
    pids: list[int] = []
    try:
        with pytest.raises(CommandTimedOut, match="ran past its timeout of 3 s") as timed_out:
            await unconfined("bash", command=command, timeout=3)
        assert "started" in timed_out.value.output and timed_out.value.timeout == 3
        pids = pids_in(root / "pids", 4)
        assert wait_dead(pids) == [], "processes of the group survived its timeout"
    finally:
        kill_quietly(pids)


async def test_what_a_command_leaves_running_is_ended_with_it(
    unconfined: Tools, root: Path
) -> None:
    pids: list[int] = []
    try:
        answer = await unconfined(
            "bash",
            command="sleep 300 & echo $! >> pids; (trap '' TERM; exec sleep 301) & "
            "echo $! >> pids; echo done",
        )
        assert answer == "done\n[exit code 0]"
        pids = pids_in(root / "pids", 2)
        assert wait_dead(pids) == []
    finally:
        kill_quietly(pids)


async def test_cancelling_the_call_kills_the_group(unconfined: Tools, root: Path) -> None:
    pids: list[int] = []
    running = asyncio.ensure_future(
        unconfined("bash", command="echo $$ >> pids; sleep 300 & echo $! >> pids; wait")
    )
    try:
        pids = await asyncio.to_thread(pids_in, root / "pids", 2)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert wait_dead(pids) == []
    finally:
        running.cancel()
        kill_quietly(pids)


async def test_the_timeout_asked_for_is_capped_by_the_workspace(root: Path) -> None:
    shell = Tools(workspace(root, bash_timeout=0.5, kill_grace=0.2))
    result = await shell.result("bash", command="echo begun; sleep 300", timeout=1000)
    assert result.is_error
    assert result.content.startswith(
        "bash failed: CommandTimedOut: the command ran past its timeout of 0.5 s and its "
        "process group was killed; its output until then:\nbegun\n[timed out after 0.5 s"
    )


async def test_output_is_capped_head_and_tail(root: Path) -> None:
    recorder = Recorder()
    shell = Tools(workspace(root, max_output_bytes=1000), recorder)
    answer = await shell(
        "bash", command="echo START; head -c 100000 /dev/zero | tr '\\0' a; echo; echo END"
    )
    head, _, tail = answer.partition("\n[... ")
    assert head.startswith("START\n" + "a" * 100) and len(head.encode()) == 500
    assert tail.startswith(f"{6 + 100000 + 1 + 4 - 1000} bytes of output left out ...]\n")
    assert tail.endswith("a\nEND\n[exit code 0]")
    streamed = "".join(recorder.progress)
    assert streamed.startswith("START\naaa") and "no more is streamed" in streamed
    assert len(streamed.split("\n[output over")[0].encode()) == 1000


async def test_output_is_streamed_as_progress_while_the_command_runs(root: Path) -> None:
    """The command waits for a file the test makes only once it has seen the command's
    first line as progress: it could not finish as it does without live streaming."""

    def on_progress(text: str) -> None:
        if "first" in text:
            (root / "go").touch()

    recorder = Recorder(on_progress=on_progress)
    shell = Tools(workspace(root), recorder)
    command = (
        "echo first; for i in $(seq 1 2000); do [ -e go ] && break; sleep 0.01; done; "
        "[ -e go ] && echo saw-go || echo no-go"
    )
    assert await shell("bash", command=command) == "first\nsaw-go\n[exit code 0]"
    assert recorder.progress[0] == "first\n" and "".join(recorder.progress) == "first\nsaw-go\n"


async def test_utf8_split_across_chunks_streams_whole(root: Path) -> None:
    recorder = Recorder()
    shell = Tools(workspace(root), recorder)
    answer = await shell("bash", command="printf '\\xc3'; sleep 0.1; printf '\\xa9\\n'")
    assert answer == "é\n[exit code 0]" and "".join(recorder.progress) == "é\n"


def test_bash_can_be_left_out_or_gated(root: Path) -> None:
    assert "bash" not in {t.name for t in workspace(root, bash=False)}
    [gated] = [t for t in workspace(root, bash_approval=True) if t.name == "bash"]
    assert gated.spec.mediation is Mediation.APPROVAL and gated.spec.idempotent is False
    [plain] = [t for t in workspace(root) if t.name == "bash"]
    assert plain.spec.mediation is Mediation.HOST and plain.spec.idempotent is False
