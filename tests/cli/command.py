"""The ``tether`` command, run to its end: in this process through typer's test runner, or
as a user runs it, the real console script in a child process.

A child process costs a second of CPU (its interpreter and imports) to check what the command
itself does in milliseconds, so :func:`tether` runs a command in process unless it needs a
process of its own: ``serve`` and ``worker`` (they install signal handlers and run servers),
a command that imports the user's code (``--app``: its modules would stay imported in this
one, under another test's name) or runs in another directory (``cwd``). ``real=True`` asks for
the child process anyway: each command family keeps a test of the real script (its exit
status, its streams, its interpreter), and ``tests/cli/test_help.py`` checks what the real
script imports."""

import os
import queue
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from typer.testing import CliRunner

from tether.cli import app

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


IN_A_PROCESS = frozenset({"serve", "worker"})
"""The commands :func:`tether` always runs as a child process."""


def needs_a_process(args: tuple[str, ...], cwd: Path | None) -> bool:
    """Whether ``tether *args`` must run as a child process (see the module's docstring)."""
    return cwd is not None or "--app" in args or bool(IN_A_PROCESS.intersection(args[:1]))


def tether(
    *args: str,
    code: int = 0,
    cwd: Path | None = None,
    timeout: float = 90,
    real: bool = False,
    **env: str,
) -> Result:
    """Run ``tether *args`` to its end, in this process unless ``real`` or the command needs
    a process of its own; its exit status must be ``code``."""
    if real or needs_a_process(args, cwd):
        return tether_process(*args, code=code, cwd=cwd, timeout=timeout, **env)
    extra = {name: value for name, value in cli_env(**env).items() if os.environ.get(name) != value}
    done = CliRunner().invoke(app, list(args), env=extra, catch_exceptions=False)
    result = Result(done.exit_code, done.stdout, done.stderr)
    assert result.code == code, result
    return result


def tether_process(
    *args: str, code: int = 0, cwd: Path | None = None, timeout: float = 90, **env: str
) -> Result:
    """Run the real ``tether *args`` console script to its end in a child process; its exit
    status must be ``code``."""
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
