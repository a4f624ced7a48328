"""Built-in tools for coding agents: ``workspace(root)`` gives ``read``, ``write``, ``edit``,
``glob``, ``grep`` and ``bash``, rooted at a directory; ``mcp(command=[...])`` or
``mcp(url=...)`` gives an MCP server's tools, journaled like any (docs/mcp.md).

Example::

    from tether.agent import agent_spec
    from tether.engine import AgentDefinition
    from tether.tools import workspace

    tools = workspace("./scratch", bash_approval=True)
    coder = AgentDefinition(lambda instance, env: agent_spec(model, tools=tools))

**The threat model.** The file tools (``read``, ``write``, ``edit``, ``glob``, ``grep``) are
*confined* to the root: a path that is absolute, holds a ``..`` component, a NUL byte or more
than 4096 bytes, or that leads through a symbolic link out of the root, is refused with a
typed error (:class:`PathOutsideRoot`, :class:`InvalidPath`) the model reads as the tool's
result. Paths are resolved one component at a time by file descriptor, with ``O_NOFOLLOW``,
so a link swapped in mid-way is never followed (the technique, and what it leaves out, is in
the docstring of ``tether/tools/_paths.py``). ``bash`` runs in a **sandbox**: bubblewrap
(``bwrap``) gives each command its own PID, network, IPC and UTS namespaces and no
capabilities; it sees the workspace read-write, the system's programs and part of ``/etc``
read-only, a private ``/tmp``, and nothing else of the host (not the worker's environment,
files, sockets or network); its processes, memory, CPU time and file sizes are bounded
(:class:`SandboxLimits`), and nothing it starts outlives the call. Where ``bwrap`` is missing
or cannot make namespaces, :func:`workspace` raises :class:`SandboxUnavailable`;
``sandbox="none"`` opts out: commands then run as the worker's user, with its access to
every file and network, and get only hygiene (their own process group killed on timeout, a
scrubbed environment, an output cap). The sandbox does not make a command's effects inside
the workspace safe, nor its output (which the model reads): gate every command on a human
(``bash_approval=True``) where that matters, or leave ``bash`` out (``bash=False``). The
details: the docstring of ``tether/tools/_sandbox.py``.

**Recovery classes** (docs/architecture.md §5, I3: what a recovery does with a tool call
whose intent is journaled and whose outcome is not):

- ``read``, ``glob``, ``grep``: idempotent, they change nothing; re-run.
- ``write``: idempotent by content: it replaces the whole file with the same bytes however
  often it runs; re-run.
- ``edit``: idempotent by content: a durable step journals the file's digest before and
  after the edit before the file is touched, so a re-run finds the file edited (and leaves
  it), unedited (and edits it), or changed by something else (and refuses:
  :class:`FileChanged`); it never applies twice.
- ``bash``: not idempotent: never re-run by a recovery, whose outcome is then ``unknown``
  for the model to judge; approval optional (the journal marks an approved call's run before
  it starts, so an approved command cut short is not run twice either).

**Deadlines.** The file tools' work runs in a worker process, never in the server's: a call
past ``tool_timeout`` (30 s) has its worker killed and fails with :class:`ToolTimedOut`.
``grep`` searches with RE2 (linear time) where ``google-re2`` is installed and the pattern
allows, with Python's ``re`` otherwise (see docs/workspace-tools.md).
"""

from tether.tools._errors import (
    BinaryFile,
    CommandTimedOut,
    EditMismatch,
    FileChanged,
    FileTooLarge,
    InvalidPath,
    InvalidPattern,
    NotAFile,
    PathNotFound,
    PathOutsideRoot,
    SandboxUnavailable,
    ToolTimedOut,
    WorkspaceError,
)
from tether.tools._mcp import mcp
from tether.tools._sandbox import SandboxLimits
from tether.tools._search import DEFAULT_IGNORE
from tether.tools._workspace import workspace

__all__ = (
    "DEFAULT_IGNORE",
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
    "SandboxLimits",
    "SandboxUnavailable",
    "ToolTimedOut",
    "WorkspaceError",
    "mcp",
    "workspace",
)
