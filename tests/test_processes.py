"""The test tree's process helpers leave nothing running and nothing to warn about later."""

import contextlib
import gc
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from .processes import free_port, reap, reap_started, start, wait_ready_blocking

pytestmark = pytest.mark.process

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _collected_warnings(drop: list[subprocess.Popen[bytes]]) -> list[str]:
    """Collect the only reference to each process, as a later test's garbage collection would,
    and return what that warned about."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        drop.clear()
        gc.collect()
    return [str(warning.message) for warning in caught]


def test_a_server_that_never_gets_ready_is_reaped(tmp_path: Path) -> None:
    processes = [start(SLEEPER, stdout=subprocess.PIPE, stderr=subprocess.PIPE)]
    with pytest.raises(AssertionError, match="did not become ready"):
        wait_ready_blocking(f"http://127.0.0.1:{free_port()}", processes[0], seconds=0.5)
    assert processes[0].returncode is not None
    assert _collected_warnings(processes) == []


def test_a_server_that_exits_fails_the_wait_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("port already in use\n")
    processes = [start([sys.executable, "-c", "raise SystemExit(3)"])]
    with pytest.raises(AssertionError, match="exited with 3:\nport already in use"):
        wait_ready_blocking(f"http://127.0.0.1:{free_port()}", processes[0], log)
    assert _collected_warnings(processes) == []


def test_reap_stops_a_process_that_ignores_sigterm() -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print(1, flush=True); time.sleep(600)"
    )
    processes = [start([sys.executable, "-c", stubborn], stdout=subprocess.PIPE)]
    assert processes[0].stdout is not None and processes[0].stdout.readline()  # handler set
    reap(processes[0], grace=0.2)
    assert processes[0].returncode == -9
    assert _collected_warnings(processes) == []


def test_what_a_test_left_running_is_reaped_at_its_end() -> None:
    processes = [start(SLEEPER, stdout=subprocess.PIPE), start(SLEEPER)]
    reap_started()  # what the autouse fixture in tests/conftest.py does after every test
    assert all(process.returncode is not None for process in processes)
    assert _collected_warnings(processes) == []


def test_an_unreaped_process_is_what_these_guard_against() -> None:
    """The failure mode itself: a Popen collected while its child runs warns."""
    processes = [subprocess.Popen(SLEEPER)]
    pid = processes[0].pid
    try:
        assert any("still running" in text for text in _collected_warnings(processes))
    finally:
        os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # subprocess may have reaped it already
            os.waitpid(pid, 0)
