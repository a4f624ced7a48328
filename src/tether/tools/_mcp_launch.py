"""How a stdio MCP server is started so that it dies with the worker that started it.

A server learns that its client went away when its stdin ends, but a server busy in a tool
call (or one that ignores stdin's end) would outlive a worker killed with SIGKILL, an orphan
holding whatever it holds. On Linux the server is therefore started through a few lines of
Python that ask the kernel to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``, kept
across ``exec``) and then become the server (``execvp``): nothing stays between the two.
Elsewhere the command runs as given.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ("launched",)

_LAUNCHER = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)  # the parent died before the request took: it will never be delivered
os.execvp(sys.argv[2], sys.argv[2:])
"""


def launched(argv: Sequence[str]) -> list[str]:
    """The command that runs ``argv`` as a child of this process that dies with it."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-I", "-c", _LAUNCHER, str(os.getpid()), *argv]
