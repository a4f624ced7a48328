"""The real ``tether`` console script, run as a user runs it: a child process."""

import selectors
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def read_line(process: subprocess.Popen[Any], seconds: float = 60) -> str:
    """The next line ``process`` writes on its stdout pipe ("" once it exits without one)."""
    assert process.stdout is not None
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=0.2):
                line: str = process.stdout.readline()
                return line
    raise AssertionError(f"no line from {process.args!r} in {seconds} s")
