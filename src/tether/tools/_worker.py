"""The worker process of the file tools, started by ``tether/tools/_pool.py``.

It reads one request a line on stdin (JSON: the operation, the workspace's root, caps and
ignored names, the arguments), does the work with the blocking functions of ``_files`` and
``_search``, and writes one answer a line on stdout (``{"ok": value}`` or ``{"error":
{"type", "message", ...}}``), then waits for the next. It ends at the end of its stdin (the
server closed it, or exited), and is killed when the server ends (Linux). The server kills
it at a deadline, so nothing here watches the time; each request sets the process's
address-space limit to the memory the work may take, and a worker that ran out says so and
ends.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from tether.tools._errors import EditMismatch
from tether.tools._files import Limits, apply_edit, plan_edit, read_text, write_text
from tether.tools._paths import Root
from tether.tools._search import glob_paths, grep_files

if TYPE_CHECKING:  # not at run time: pydantic would cost the worker's start 50 ms
    from pydantic import JsonValue

__all__ = ("READY", "answer", "main")

READY = b"ready\n"
"""What a worker writes once it imported what it needs."""

_PR_SET_PDEATHSIG = 1  # linux/prctl.h

_Operation = Callable[[Root, Limits, frozenset[str], dict[str, Any]], "JsonValue"]
"""An operation: the root, the caps, the ignored names, the tool's arguments (as the
server's ``WorkerCalls`` sent them: checked by the tool's schema before)."""


def _read(root: Root, limits: Limits, ignore: frozenset[str], a: dict[str, Any]) -> str:
    return read_text(root, a["path"], a["offset"], a["limit"], limits)


def _write(root: Root, limits: Limits, ignore: frozenset[str], a: dict[str, Any]) -> str:
    return write_text(root, a["path"], a["content"], limits)


def _plan_edit(root: Root, limits: Limits, ignore: frozenset[str], a: dict[str, Any]) -> JsonValue:
    return plan_edit(root, a["path"], a["old_string"], a["new_string"], a["replace_all"], limits)


def _apply_edit(root: Root, limits: Limits, ignore: frozenset[str], a: dict[str, Any]) -> str:
    return apply_edit(root, a["plan"], a["old_string"], a["new_string"], a["replace_all"], limits)


def _glob(root: Root, limits: Limits, ignore: frozenset[str], a: dict[str, Any]) -> str:
    return glob_paths(root, a["pattern"], a["path"], limits, ignore)


def _grep(root: Root, limits: Limits, ignore: frozenset[str], a: dict[str, Any]) -> str:
    return grep_files(root, a["pattern"], a["path"], a["glob"], a["ignore_case"], limits, ignore)


OPERATIONS: dict[str, _Operation] = {
    "read": _read,
    "write": _write,
    "plan_edit": _plan_edit,
    "apply_edit": _apply_edit,
    "glob": _glob,
    "grep": _grep,
}


def _limit_memory(limit: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def answer(request: dict[str, Any]) -> dict[str, JsonValue]:
    """The answer to one request: ``{"ok": value}``, or ``{"error": ...}`` with ``"end":
    true`` where the worker should end after giving it (it ran out of memory)."""
    try:
        value = OPERATIONS[request["op"]](
            Root.resolved(request["root"]),
            Limits(*request["limits"]),
            frozenset(request["ignore"]),
            request["args"],
        )
    except MemoryError:
        message = f"the work needed more than the worker's {request['memory'] >> 20} MiB"
        return {"error": {"type": "WorkspaceError", "message": message}, "end": True}
    except Exception as exc:  # typed errors, OSErrors, and a defect's: the model reads them
        error: dict[str, JsonValue] = {"type": type(exc).__name__, "message": str(exc)}
        if isinstance(exc, EditMismatch):
            error["matches"] = exc.matches
        return {"error": error}
    return {"ok": value}


def _serve(requests: BinaryIO, answers: BinaryIO) -> None:
    answers.write(READY)
    answers.flush()
    while line := requests.readline():
        request = json.loads(line.decode("utf-8", "surrogatepass"))
        _limit_memory(request["memory"])
        reply = answer(request)
        # ensure_ascii=False with surrogatepass: text travels at its own size, and a file
        # name that is not UTF-8 (held with surrogates) survives the trip.
        encoded = json.dumps(reply, ensure_ascii=False).encode("utf-8", "surrogatepass")
        answers.write(encoded + b"\n")
        answers.flush()
        if reply.get("end"):
            return


def _end_with(server: int) -> None:
    """Be killed when the server ends (Linux). A server that ends closes the worker's input,
    but a worker in a match that never ends would never read it, and run on, orphaned."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the deadline's kill is all there is
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server:  # it ended before the prctl
        os._exit(0)


def main(server: int) -> None:
    """Serve requests until stdin ends, and end with the ``server`` process. stdout is the
    answers' channel only: whatever else would print there (a stray ``print``, a warning)
    goes to stderr."""
    _end_with(server)
    warnings.simplefilter("ignore")  # re's FutureWarning on a nested set is no answer
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        _serve(sys.stdin.buffer, answers)
    except KeyboardInterrupt:
        pass
    finally:
        answers.close()
