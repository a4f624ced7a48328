"""An example as its runbook starts it: ``python -m examples.<name> --port P --store S`` from the
repository root, a real process on a free port, its stdout and stderr in a log file.

The keyless model always: ``TETHER_MODEL`` is removed from the child's environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..processes import eventually, free_port, kill, log_text, reap, start, wait_ready_blocking

__all__ = ("ROOT", "WAIT", "Example", "start_example", "until")

ROOT = Path(__file__).resolve().parents[2]
"""The repository root: the examples' working directory."""
WAIT = 60.0
"""How long a test waits for something a process does (generous: a loaded 2-core machine)."""


@dataclass
class Example:
    process: subprocess.Popen[Any]
    url: str
    log: Path

    def output(self) -> str:
        """What the process printed so far (stdout and stderr)."""
        return log_text(self.log)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        kill(self.process)

    def stop(self) -> None:
        """SIGTERM, as an operator would (SIGKILL if it does not exit in time)."""
        reap(self.process)

    def wait_ready(self) -> None:
        """Until it answers ``/readyz`` (killed, with its log in the failure, if it never does)."""
        wait_ready_blocking(self.url, self.process, self.log)

    def wait_for_output(self, text: str, *, seconds: float = WAIT) -> None:
        """Until ``text`` is in the process's output."""

        def seen() -> bool:
            if text in self.output():
                return True
            if self.process.poll() is not None:
                code = self.process.returncode
                raise AssertionError(f"the example exited ({code}) first:\n{self.output()}")
            return False

        until(seen, f"{text!r} in the output of the example", seconds=seconds)


def start_example(
    name: str, store: str, log: Path, *args: str, port: int | None = None, ready: bool = True
) -> Example:
    """``python -m examples.<name>`` on ``store``, on ``port`` (a free one if not given);
    once it answers ``/readyz`` unless ``ready`` is false."""
    port = free_port() if port is None else port
    env = {key: value for key, value in os.environ.items() if key != "TETHER_MODEL"}
    env["PYTHONUNBUFFERED"] = "1"
    command = [sys.executable, "-m", f"examples.{name}", "--port", str(port), "--store", store]
    with log.open("ab") as out:
        process = start([*command, *args], cwd=ROOT, env=env, stdout=out, stderr=out)
    example = Example(process, f"http://127.0.0.1:{port}", log)
    if ready:
        example.wait_ready()
    return example


def until(check: Callable[[], bool], what: str, *, seconds: float = WAIT) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``seconds``."""
    eventually(check, what, seconds=seconds)
