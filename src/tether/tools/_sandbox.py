"""``bash``'s sandbox: bubblewrap (``bwrap``) namespaces, a read-only view of the system's
programs, the workspace read-write, and per-process limits (``prlimit``).

One ``bwrap`` per command. What the command gets:

- **Its own PID namespace.** ``/proc`` shows only the sandbox's processes: no other
  process's environment or command line, the worker's least of all. ``bwrap``'s init is its
  PID 1; when the command ends, or ``bwrap`` is killed (``--die-with-parent``), that init
  dies and the kernel kills everything else in the namespace, so a ``setsid`` or ``nohup``
  daemon does not outlive the call.
- **Its own network, IPC and UTS namespaces** (a loopback of its own and nothing else: no
  port of the host, no abstract socket), a user namespace where the kernel allows one, and
  **no capabilities** (``--cap-drop ALL``: for a worker running as root, ``bwrap`` would
  otherwise keep them, and a root with ``CAP_SYS_ADMIN`` can mount the host's disks).
  ``--new-session``: no terminal to push input into.
- **A file system of its own**: ``/usr`` read-only (and ``/bin``, ``/lib``... as the host has
  them: links into ``/usr`` or read-only binds), a curated part of ``/etc`` read-only
  (:data:`ETC`: what programs need, none of the host's keys or service configurations), a
  fresh ``/proc``, a minimal ``/dev``, a private ``/tmp`` (a tmpfs), the paths given as
  ``read_only``, and the workspace read-write at its own path. Nothing else of the host:
  not ``/home``, ``/root``, ``/run`` (database sockets), ``/var``, nor the Tether data
  directory. A file outside the workspace has no path inside, so no hard link to it can be
  made either (and none across the bind mount: ``EXDEV``).
- **A clean environment.** ``bwrap`` itself is started with the command's environment only
  (its init's ``/proc/1/environ`` is readable inside), and ``--clearenv`` and ``--setenv``
  give the command the same.
- **Limits per process** (:class:`SandboxLimits`), set by ``prlimit`` inside the sandbox,
  after ``bwrap`` made the user namespace: there ``RLIMIT_NPROC`` counts the sandbox's own
  processes (set before, it would count every process of the worker's user on the host).
  The kernel does not apply ``RLIMIT_NPROC`` to root: a worker running as root bounds the
  processes with a pids cgroup instead (``tools/_cgroup.py``), where it can make one.

The first sandbox of a process probes ``bwrap`` (one ``true`` in a sandbox of a scratch
directory); its answer is kept for the process's life.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from tether.tools._cgroup import PidsCgroup, pids_parent
from tether.tools._errors import SandboxUnavailable, WorkspaceError

__all__ = ("ETC", "SANDBOX_PATH", "Launch", "Sandbox", "SandboxLimits", "sandbox_for")

logger = logging.getLogger("tether.tools")

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
"""The command's ``PATH`` in the sandbox (``bash_env`` may set another)."""

ETC = (
    "alternatives",
    "bash.bashrc",
    "debian_version",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "magic",
    "magic.mime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "perl",
    "profile",
    "protocols",
    "python3*",
    "services",
    "shells",
    "terminfo",
    "timezone",
)
"""The entries of ``/etc`` a command sees (names or globs), read-only: users and groups by
name, the dynamic linker's cache, locale and time zone, the links of ``alternatives``, the
shell's and the interpreters' own files. Not the host's secrets (``shadow``, ``ssh``,
``ssl/private``) nor its services' configurations."""

_NAMESPACES = (
    "--unshare-user-try",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--hostname",
    "sandbox",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
)
_TOP = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_PROBE_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one ``bash`` command may use in its sandbox, per process (``prlimit``), except
    ``processes``, which counts all of the sandbox's.

    - ``processes``: how many processes (and threads) at once; a fork past it fails
      (``EAGAIN``), so a fork bomb stalls until the call's timeout kills it.
    - ``memory_bytes``: each process's address space (``RLIMIT_AS``); an allocation past it
      fails. Runtimes that reserve much more than they use (the JVM, V8) may need more.
    - ``file_bytes``: the largest file a process may write (``RLIMIT_FSIZE``: ``SIGXFSZ``).
    - ``tmp_bytes``: the size of the sandbox's private ``/tmp`` (a tmpfs, in memory).
    - ``cpu_seconds``: each process's CPU time (``RLIMIT_CPU``: ``SIGXCPU``); ``None``, the
      call's timeout (the timeout bounds the whole sandbox's wall-clock time anyway).

    Example::

        from tether.tools import SandboxLimits, workspace

        tools = workspace("./scratch", sandbox_limits=SandboxLimits(memory_bytes=8 << 30))
    """

    processes: int = 256
    memory_bytes: int = 4 << 30
    file_bytes: int = 1 << 30
    tmp_bytes: int = 256 << 20
    cpu_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("processes", "memory_bytes", "file_bytes", "tmp_bytes", "cpu_seconds"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value <= 0):
                raise ValueError(f"SandboxLimits.{name} must be positive, not {value!r}")


@dataclass(frozen=True, slots=True)
class Launch:
    """One command's launch: its argv on the host, and what to undo once it was reaped."""

    argv: list[str]
    cleanup: Callable[[], object] | None = None


@dataclass(frozen=True, slots=True)
class _Tools:
    bwrap: str
    prlimit: str
    version: str


def _size(count: int) -> str:
    """``4 GiB``, ``256 MiB``: a byte count as the log line shows it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift and count % (1 << shift) == 0:
            return f"{count >> shift} {unit}"
    return f"{count} bytes"


def _top_level() -> list[str]:
    """``/bin``, ``/lib``...: a link into ``/usr`` stays a link, a directory is bound."""
    arguments: list[str] = []
    for name in _TOP:
        path = "/" + name
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            arguments += ["--ro-bind", path, path]
    return arguments


def _etc() -> list[str]:
    try:
        names = sorted(os.listdir("/etc"))
    except OSError:
        return []
    arguments: list[str] = []
    for name in names:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in ETC):
            path = f"/etc/{name}"
            arguments += ["--ro-bind-try", path, path]
    return arguments


@functools.cache
def _system() -> tuple[str, ...]:
    """The host's part of every sandbox: namespaces, programs, ``/etc``, ``/proc``, ``/dev``
    (looked at once per process)."""
    return (
        *_NAMESPACES,
        "--ro-bind",
        "/usr",
        "/usr",
        *_top_level(),
        *_etc(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    )


def _command_line(
    tools: _Tools,
    root: str,
    read_only: Iterable[str],
    limits: SandboxLimits,
    env: Mapping[str, str],
    command: str,
    cpu_seconds: int,
) -> list[str]:
    arguments = [tools.bwrap, *_system(), "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    for path in read_only:
        arguments += ["--ro-bind", path, path]
    # The workspace last: mounted over whatever above holds its path (a /tmp workspace).
    arguments += ["--bind", root, root, "--chdir", root, "--clearenv"]
    for name, value in env.items():
        arguments += ["--setenv", name, value]
    return [
        *arguments,
        "--",
        tools.prlimit,
        f"--nproc={limits.processes}",
        f"--as={limits.memory_bytes}",
        f"--fsize={limits.file_bytes}",
        f"--cpu={cpu_seconds}:{cpu_seconds + 1}",  # SIGXCPU, then SIGKILL a second later
        "--",
        "bash",
        "-c",
        command,
    ]


def _probe_env() -> dict[str, str]:
    return {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8"}


@functools.cache
def _tools(host_path: str) -> _Tools | str:
    """The programs the sandbox needs and a sandbox that ran, or why not (the message)."""
    opt_out = (
        'or pass sandbox="none" to run commands unconfined, as the worker\'s user, with '
        "its access to every file and network it can reach"
    )
    bwrap = shutil.which("bwrap", path=host_path)
    if bwrap is None:
        return (
            "bash's sandbox needs bubblewrap (bwrap), which is not installed (Debian and "
            f"Ubuntu: apt-get install bubblewrap); install it, {opt_out}"
        )
    prlimit = shutil.which("prlimit", path=SANDBOX_PATH)
    if prlimit is None:
        return f"bash's sandbox needs prlimit (util-linux), which is not installed; {opt_out}"
    with tempfile.TemporaryDirectory(prefix="tether-sandbox-probe-") as scratch:
        tools = _Tools(bwrap, prlimit, "")
        argv = _command_line(tools, scratch, (), SandboxLimits(), _probe_env(), "true", 10)
        try:
            ran = subprocess.run(
                argv,
                env=_probe_env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_PROBE_TIMEOUT,
                check=False,
            )
            version = subprocess.run(
                [bwrap, "--version"], capture_output=True, timeout=_PROBE_TIMEOUT, check=False
            ).stdout.decode(errors="replace")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap ({bwrap}) could not be run: {exc}; {opt_out}"
    if ran.returncode != 0:
        said = ran.stderr.decode(errors="replace").strip() or f"exit code {ran.returncode}"
        return (
            f"bwrap ({bwrap}) cannot make a sandbox on this machine: {said}. It needs user "
            "namespaces (or to run as root), which some kernels and container runtimes "
            f"forbid; allow them, {opt_out}"
        )
    return _Tools(bwrap, prlimit, version.strip() or "bwrap")


class Sandbox:
    """The ``bwrap`` sandbox of one workspace root; making it probes ``bwrap`` (once per
    process) and raises :class:`SandboxUnavailable` where no sandbox can be made."""

    def __init__(self, root: str, limits: SandboxLimits, read_only: Iterable[str] = ()) -> None:
        if root == "/":
            raise ValueError(
                "the sandbox binds the workspace read-write: a workspace at / would give a "
                "command the whole file system"
            )
        paths = []
        for path in read_only:
            if not os.path.isabs(path) or not os.path.exists(path):
                raise ValueError(f"sandbox_paths takes existing absolute paths, not {path!r}")
            paths.append(os.path.realpath(path))
        tools = _tools(os.environ.get("PATH") or os.defpath)
        if isinstance(tools, str):
            raise SandboxUnavailable(tools)
        self.root = root
        self.limits = limits
        self.read_only = tuple(paths)
        self._tools = tools
        # Root is exempt from RLIMIT_NPROC: its sandboxes count processes in a cgroup.
        self._pids = pids_parent() if os.geteuid() == 0 else None
        self.processes_bounded = os.geteuid() != 0 or self._pids is not None

    def describe(self) -> str:
        """One line for the log: what the sandbox is and what bounds it."""
        limits = self.limits
        processes = f"at most {limits.processes} processes"
        if self._pids is not None:
            processes += " (a pids cgroup: the worker runs as root)"
        elif not self.processes_bounded:
            processes = (
                "processes NOT bounded (the worker runs as root, which RLIMIT_NPROC does not "
                "bind, and no pids cgroup could be made: a fork bomb runs until the timeout)"
            )
        return (
            f"{self._tools.version} sandbox: own PID, network, IPC and UTS namespaces, no "
            f"capabilities; {self.root} read-write, /usr and part of /etc read-only"
            + "".join(f", {path}" for path in self.read_only)
            + f"; {processes}, {_size(limits.memory_bytes)} of address space and files "
            f"up to {_size(limits.file_bytes)} per process, a {_size(limits.tmp_bytes)} /tmp"
        )

    def cpu_seconds(self, time_limit: float) -> int:
        """The CPU time limit of a call whose timeout is ``time_limit``."""
        return max(1, math.ceil(self.limits.cpu_seconds or time_limit))

    def launch(self, command: str, env: Mapping[str, str], time_limit: float) -> Launch:
        """The host argv that runs ``command`` in the sandbox (``env`` is its whole
        environment, and ``bwrap``'s: start it with exactly that)."""
        argv = _command_line(
            self._tools,
            self.root,
            self.read_only,
            self.limits,
            env,
            command,
            self.cpu_seconds(time_limit),
        )
        if self._pids is None:
            return Launch(argv)
        # bwrap and its init count too. The shell enters the cgroup and becomes bwrap.
        try:
            cgroup = PidsCgroup(self._pids, self.limits.processes + 2)
        except OSError as exc:
            raise WorkspaceError(f"the sandbox's pids cgroup could not be made: {exc}") from None
        enter = 'echo $$ > "$0" && exec "$@"'
        return Launch(["/bin/sh", "-c", enter, cgroup.procs, *argv], cgroup.remove)


def sandbox_for(
    root: str, mode: str, limits: SandboxLimits | None, read_only: Iterable[str]
) -> Sandbox | None:
    """The sandbox ``workspace(sandbox=mode)`` asks for (``None`` for ``"none"``), said in
    the log the first time a process makes it for ``root``."""
    if mode == "none":
        _announce(
            logging.WARNING,
            f"workspace {root}: bash runs unsandboxed (sandbox='none'): a command can read "
            "and write whatever the worker's user can, the worker's own environment included",
        )
        return None
    if mode != "bwrap":
        raise ValueError(f'sandbox must be "bwrap" or "none", not {mode!r}')
    sandbox = Sandbox(root, limits or SandboxLimits(), read_only)
    level = logging.INFO if sandbox.processes_bounded else logging.WARNING
    _announce(level, f"workspace {root}: bash runs in a {sandbox.describe()}")
    return sandbox


@functools.cache
def _announce(level: int, line: str) -> None:
    logger.log(level, "%s", line)
