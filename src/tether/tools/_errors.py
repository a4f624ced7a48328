"""The typed errors of the workspace tools.

A tool raising one of these does not crash a run: the agent's tool executor turns it into an
error result the model reads (``read failed: PathOutsideRoot: ...``), so every message says
what was wrong and, where there is one, what to do instead.
"""

from __future__ import annotations

from tether.errors import TetherError

__all__ = (
    "BinaryFile",
    "CommandTimedOut",
    "EditMismatch",
    "FileChanged",
    "FileTooLarge",
    "InvalidPath",
    "InvalidPattern",
    "NotAFile",
    "PathNotFound",
    "PathOutsideRoot",
    "SandboxUnavailable",
    "ToolTimedOut",
    "WorkspaceError",
)


class WorkspaceError(TetherError):
    """Base class of the workspace tools' errors."""

    code = "workspace_error"


class InvalidPath(WorkspaceError):
    """A path that is not a path: empty, holding a NUL byte, or absurdly long."""

    code = "invalid_path"


class InvalidPattern(WorkspaceError):
    """A ``grep`` pattern that is not a regular expression (Python's syntax)."""

    code = "invalid_pattern"


class PathOutsideRoot(WorkspaceError):
    """A path that names something outside the workspace root: absolute, with a ``..``
    component, or through a symbolic link pointing out of the root."""

    code = "path_outside_root"


class PathNotFound(WorkspaceError):
    """Nothing at the path (or a component of it is not a directory)."""

    code = "path_not_found"


class NotAFile(WorkspaceError):
    """The path names a directory, a FIFO, a socket or a device, not a regular file."""

    code = "not_a_file"


class BinaryFile(WorkspaceError):
    """The file holds a NUL byte near its start or is not UTF-8: it is not text to read or
    edit."""

    code = "binary_file"


class FileTooLarge(WorkspaceError):
    """A file, a content or an edit's result over the workspace's size limit."""

    code = "file_too_large"


class EditMismatch(WorkspaceError):
    """``old_string`` matched zero times, or several times where exactly one was asked for.
    ``matches`` is how many times it matched (overlapping occurrences counted)."""

    code = "edit_mismatch"

    def __init__(self, message: str, *, matches: int) -> None:
        super().__init__(message)
        self.matches = matches


class FileChanged(WorkspaceError):
    """The file changed between the moment an edit was planned and the moment it was applied
    (by something other than this edit)."""

    code = "file_changed"


class CommandTimedOut(WorkspaceError):
    """A ``bash`` command ran past its timeout; its process group was killed. The message
    holds the output it had written."""

    code = "command_timed_out"

    def __init__(self, message: str, *, output: str, timeout: float) -> None:
        super().__init__(message)
        self.output = output
        self.timeout = timeout


class SandboxUnavailable(WorkspaceError):
    """``bash``'s sandbox cannot be made on this machine: ``bwrap`` (bubblewrap) or
    ``prlimit`` is missing, or the kernel or a container runtime forbids the namespaces it
    needs. Raised by :func:`~tether.tools.workspace` when it is called, so a server fails at
    start-up, not at a model's first command; the message says why and how to opt out
    (``sandbox="none"``)."""

    code = "sandbox_unavailable"


class ToolTimedOut(WorkspaceError):
    """A file tool (``read``, ``write``, ``edit``, ``glob``, ``grep``) ran past its deadline
    (``workspace(tool_timeout=...)``); the worker process doing its work was killed."""

    code = "tool_timed_out"

    def __init__(self, message: str, *, tool: str, timeout: float) -> None:
        super().__init__(message)
        self.tool = tool
        self.timeout = timeout
