"""How a ``tether`` command fails: one line on stderr and an exit code of its own."""

from __future__ import annotations

import enum
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ("EXIT_CODES_HELP", "ExitCode", "describe", "fail", "one_line", "stderr")

stderr = Console(stderr=True, soft_wrap=True, emoji=False, highlight=False)


class ExitCode(enum.IntEnum):
    """The exit status of every ``tether`` command (listed by ``tether --help``)."""

    OK = 0
    FAILED = 1
    """The request was refused or the operation failed: an error answer from the server, a
    broken hash chain, a replay that diverged, a run that did not succeed."""
    USAGE = 2
    """A bad option or argument (click's own code)."""
    SERVER_UNREACHABLE = 3
    """No server answers at ``--url``."""
    BAD_STORE_URL = 4
    """``--store`` is not a store URL Tether can open."""
    STORE_UNAVAILABLE = 5
    """The store could not be opened (PostgreSQL unreachable, a file not a database...)."""
    NO_STORE = 6
    """A reading command found no store at ``--store``: it never creates one."""
    BAD_APP = 7
    """``--app`` cannot be loaded (no such module or attribute, or its factory failed)."""
    ADDRESS_UNAVAILABLE = 8
    """``serve`` cannot listen on ``--host``/``--port`` (in use, or not an address here)."""
    WAITING_FOR_APPROVAL = 9
    """``send --wait``: the run is parked until a human decides its approval or answers
    its input."""
    BAD_MODEL = 10
    """``TETHER_MODEL`` names no usable model: an unknown provider, a package or (``serve``,
    ``worker``) a key that is missing; or ``TETHER_MODEL_TIMEOUT`` is no number of seconds."""
    BAD_CONFIG = 11
    """A setting of ``serve`` or ``worker`` is bad: a ``TETHER_*`` variable's value, or
    ``tether.toml`` (``--config``, ``[tool.tether]``) unreadable, not TOML, or holding a bad
    key or value."""
    INTERRUPTED = 130
    """Ctrl-C."""


EXIT_CODES_HELP = """\b
Exit codes:
  0  ok
  1  refused or failed (an error answer, a broken chain, a run that failed)
  2  bad usage
  3  the server cannot be reached (--url)
  4  not a store URL (--store)
  5  the store cannot be opened (e.g. PostgreSQL is down)
  6  no store at --store (reading commands never create one)
  7  --app cannot be loaded
  8  the address is in use (--host, --port)
  9  send --wait: the run waits for an approval or an input
  10  TETHER_MODEL names no usable model (serve, worker, replay)
  11  a bad setting (a TETHER_* variable, tether.toml) (serve, worker, config)
  130  interrupted (Ctrl-C)"""


def one_line(text: object) -> str:
    """``text`` on one line: libraries' messages (psycopg's, for one) span several."""
    return " ".join(str(text).split())


def describe(exc: BaseException) -> str:
    """An exception as one line: its type and its message (an application's error)."""
    return f"{type(exc).__name__}: {one_line(exc)}"


def fail(message: str, code: ExitCode = ExitCode.FAILED) -> NoReturn:
    """Print ``error: message`` on stderr as one line and exit with ``code``."""
    stderr.print(f"[red]error[/red]: {escape(one_line(message))}")
    raise typer.Exit(int(code))
