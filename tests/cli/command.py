"""The real ``tether`` console script, run as a user runs it: a child process."""

import queue
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .conftest import cli_env

TETHER = str(Path(sys.executable).with_name("tether"))
"""The console script pip installed beside this interpreter."""


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def error(self) -> str:
        """The one line a failing command prints on stderr (asserted to be one line)."""
        lines = self.stderr.splitlines()
        assert len(lines) == 1, self.stderr
        assert lines[0].startswith("error: "), self.stderr
        return lines[0]


def tether(
    *args: str, code: int = 0, cwd: Path | None = None, timeout: float = 90, **env: str
) -> Result:
    """Run ``tether *args`` to its end; its exit status must be ``code``."""
    done = subprocess.run(
        [TETHER, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=cli_env(**env),
        timeout=timeout,
        check=False,
    )
    result = Result(done.returncode, done.stdout, done.stderr)
    assert result.code == code, result
    return result


_lines: "weakref.WeakKeyDictionary[subprocess.Popen[Any], queue.Queue[str]]" = (
    weakref.WeakKeyDictionary()
)


def read_line(process: subprocess.Popen[Any], seconds: float = 60) -> str:
    """The next line ``process`` writes on its stdout pipe ("" once it exits without one).

    A thread reads the pipe: waiting on the file descriptor would miss lines already taken
    into the pipe's buffer along with an earlier one."""
    lines = _lines.get(process)
    if lines is None:
        lines = _lines[process] = queue.Queue()
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    try:
        return lines.get(timeout=seconds)
    except queue.Empty:
        raise AssertionError(f"no line from {process.args!r} in {seconds} s") from None


def _pump(stream: IO[str], lines: "queue.Queue[str]") -> None:
    try:
        for line in stream:
            lines.put(line)
    except (OSError, ValueError):  # the pipe was closed under us: the process is gone
        pass
    finally:
        lines.put("")
