"""Paths confined to a workspace root.

**The technique: walk the path one component at a time, by file descriptor, never letting
the kernel follow a symbolic link.** A model-supplied path is first checked on its face: no
NUL byte, at most 4096 bytes (255 a component), not absolute, no ``..`` component (a ``..``
is refused even when it would stay inside, as in ``a/../b``: lexical ``..`` and the kernel's
``..`` after a symbolic link disagree, and a path with none means one thing only). Then,
starting from a descriptor of the root, each component is ``lstat``-ed and opened relative to
the descriptor of its parent with ``O_NOFOLLOW`` (``O_DIRECTORY`` for directories), the way
``openat2(RESOLVE_IN_ROOT)`` does in the kernel. A symbolic link met on the way is read and
resolved *here*: its target's components replace it (an absolute target must lie under the
root; a ``..`` pops a directory already resolved, refused at the root), and the walk starts
over from the root descriptor, at most 40 links deep. So the kernel never resolves more than
one component, and never through a link: a link swapped in between the ``lstat`` and the
``open`` makes the ``open`` fail (``ELOOP``, ``ENOTDIR``) rather than follow it, and the walk
is retried from the root (three times, then refused: "kept changing"). Files are written to a
temporary name in the resolved directory and renamed over the target, which replaces a link
or a hard link raced into the final name instead of writing through it.

The descriptor walk is portable POSIX (``openat``, ``fstatat``, ``readlinkat``, ``renameat``:
Linux and macOS), unlike ``openat2``, which Python does not expose. As a second check, where
``/proc/self/fd`` exists (Linux), the real path of every opened file or directory is read back
and must still lie under the root: a directory renamed out of the root while the walk held it
is caught there. Re-checking ``os.path.realpath`` of the *name* after opening, the other
common approach, would check a path, not the object opened, and race all the same.

What this does not cover: a hard link placed inside the root to a file outside it (the same
inode under an inside name) is read like any file; writes are safe from it (the rename
replaces the link). Whoever can create such links already has a shell, and ``bash`` is not
confined (see :mod:`tether.tools`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tether.tools._errors import (
    InvalidPath,
    NotAFile,
    PathNotFound,
    PathOutsideRoot,
    WorkspaceError,
)

__all__ = (
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MAX_SYMLINKS",
    "Location",
    "Root",
    "components",
    "shown",
)

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
MAX_SYMLINKS = 40
RETRIES = 3
"""How many times a path that changed while it was resolved is resolved again."""

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""``O_NONBLOCK``: opening a FIFO does not wait for a writer (it is then refused as not a
regular file)."""
_PROC_FD = "/proc/self/fd"
_RACED = frozenset({errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.EINVAL})
"""What an ``open`` or ``readlink`` of an entry just ``lstat``-ed fails with when the entry
was replaced meanwhile (by a link, a file, nothing, or a non-link)."""


class _Raced(Exception):
    """An entry changed between its ``lstat`` and its use: resolve again."""


def _lstat_at(name: str, dir_fd: int) -> os.stat_result:
    """``lstat`` of ``name`` in the directory ``dir_fd``; a seam the race tests widen."""
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


def shown(path: str, limit: int = 120) -> str:
    """A path for a message: quoted, and cut if absurdly long."""
    return repr(path if len(path) <= limit else path[:limit] + "...")


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def components(path: str) -> list[str]:
    """The components of a model-supplied path, relative to the root (``[]`` for the root
    itself); refuses a path that is not one, or that leaves the root on its face."""
    if not path:
        raise InvalidPath("the path is empty: give a path relative to the workspace root")
    if "\x00" in path:
        raise InvalidPath(f"the path {shown(path)} contains a NUL byte")
    try:
        size = len(os.fsencode(path))
    except UnicodeEncodeError:
        raise InvalidPath(f"the path {shown(path)} is not valid text") from None
    if size > MAX_PATH_BYTES:
        raise InvalidPath(
            f"the path is {size} bytes long; the limit is {MAX_PATH_BYTES} ({shown(path, 60)})"
        )
    if path.startswith("/"):
        raise PathOutsideRoot(
            f"{shown(path)} is an absolute path: give a path relative to the workspace root"
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PathOutsideRoot(
            f"{shown(path)} contains '..': paths are relative to the workspace root and may "
            "not climb out of it (write the path without '..')"
        )
    for part in parts:
        if len(os.fsencode(part)) > MAX_NAME_BYTES:
            raise InvalidPath(
                f"a component of {shown(path, 60)} is longer than {MAX_NAME_BYTES} bytes"
            )
    return parts


@dataclass(frozen=True, slots=True)
class Location:
    """Where a path resolved to: the open directory ``dir_fd`` holding ``name`` (``None``:
    the path is that directory itself), and the resolved path relative to the root."""

    dir_fd: int
    name: str | None
    parts: tuple[str, ...]

    @property
    def rel(self) -> str:
        return "/".join(self.parts) or "."

    @property
    def parent_rel(self) -> str:
        return "/".join(self.parts[:-1] if self.name is not None else self.parts) or "."


class Root:
    """A workspace root: its real path, fixed when the workspace is made."""

    path: str
    _parts: list[str]

    def __init__(self, root: str | os.PathLike[str]) -> None:
        given = os.fspath(root)
        real = os.path.realpath(given)
        if not os.path.isdir(real):
            raise NotADirectoryError(f"the workspace root {given!r} is not a directory")
        self._settle(real)

    def _settle(self, real: str) -> None:
        self.path = real
        self._parts = [part for part in real.split("/") if part]

    @classmethod
    def resolved(cls, real: str) -> Root:
        """The root at ``real``, the :attr:`path` of a root made before (a worker process
        gets it so): not resolved again, so a link put in its place since is not followed,
        as the root that made it would not."""
        root = cls.__new__(cls)
        root._settle(real)
        return root

    def open(self) -> int:
        try:
            return os.open(self.path, DIR_FLAGS)
        except OSError as exc:
            raise WorkspaceError(
                f"the workspace root {self.path} cannot be opened: {exc.strerror}"
            ) from None

    def verify(self, fd: int, rel: str) -> None:
        """Check that what ``fd`` holds open still lies under the root (Linux; elsewhere
        the descriptor walk is the whole check)."""
        try:
            real = os.readlink(f"{_PROC_FD}/{fd}")
        except OSError:
            return
        if not inside(real, self.path):
            raise PathOutsideRoot(f"{shown(rel)} was moved outside the workspace while in use")

    @contextmanager
    def locate(self, path: str, *, create_dirs: bool = False) -> Iterator[Location]:
        """Resolve ``path`` under the root, following links that stay inside; the directory
        descriptor is closed on leaving. ``create_dirs`` makes missing parent directories."""
        parts = components(path)
        for _ in range(RETRIES):
            try:
                fd, name, resolved = self._walk(parts, path, create_dirs)
            except _Raced:
                continue
            try:
                self.verify(fd, "/".join(resolved) or ".")
                yield Location(fd, name, resolved)
            finally:
                os.close(fd)
            return
        raise WorkspaceError(f"{shown(path)} kept changing while it was resolved; try again")

    def _target(self, target: str, done: list[str], link: str, path: str) -> list[str]:
        """A link's target as components from the root (``..`` kept, resolved by the walk)."""
        if "\x00" in target:  # not possible from readlink; kept for the type's sake
            raise InvalidPath(f"the link {shown(link)} has an invalid target")
        if not target.startswith("/"):
            return [*done, *target.split("/")]
        parts = target.split("/")
        absolute = [part for part in parts if part not in ("", ".")]
        if absolute[: len(self._parts)] != self._parts:
            raise PathOutsideRoot(
                f"{shown(path)} goes through the symbolic link {shown(link)} -> "
                f"{shown(target)}, which points outside the workspace"
            )
        return absolute[len(self._parts) :]

    def _walk(
        self, parts: list[str], path: str, create_dirs: bool
    ) -> tuple[int, str | None, tuple[str, ...]]:
        pending = list(reversed(parts))  # a stack: the next component is last
        done: list[str] = []
        links = 0
        via = ""  # the last link followed, for a message
        fd = self.open()
        try:
            while pending:
                name = pending.pop()
                if name in ("", "."):
                    continue
                if name == "..":  # only from a link's target: pop a resolved directory
                    if not done:
                        raise PathOutsideRoot(
                            f"{shown(path)} goes through the symbolic link {via}, which points "
                            "outside the workspace"
                        )
                    pending += reversed(done[:-1])
                    done = []
                    os.close(fd)
                    fd = -1
                    fd = self.open()
                    continue
                if len(os.fsencode(name)) > MAX_NAME_BYTES:
                    raise InvalidPath(f"a link under {shown(path)} names an over-long component")
                try:
                    st: os.stat_result | None = _lstat_at(name, fd)
                except FileNotFoundError:
                    st = None
                except NotADirectoryError:
                    raise _Raced from None
                if st is None and not pending:
                    return fd, name, (*done, name)  # a new file's name, in an existing directory
                if st is None:
                    if not create_dirs:
                        raise PathNotFound(
                            f"{shown(path)}: the directory {shown('/'.join([*done, name]))} "
                            "does not exist"
                        )
                    try:
                        os.mkdir(name, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass  # made meanwhile: whatever is there is opened without following
                elif stat.S_ISLNK(st.st_mode):
                    links += 1
                    link = "/".join([*done, name])
                    if links > MAX_SYMLINKS:
                        raise InvalidPath(
                            f"{shown(path)}: more than {MAX_SYMLINKS} symbolic links to follow"
                        )
                    try:
                        target = os.readlink(name, dir_fd=fd)
                    except OSError as exc:
                        if exc.errno in _RACED:
                            raise _Raced from None
                        raise
                    pending += reversed(self._target(target, done, link, path))
                    via = f"{shown(link)} -> {shown(target)}"
                    done = []
                    os.close(fd)
                    fd = -1
                    fd = self.open()
                    continue
                elif not pending:
                    return fd, name, (*done, name)
                elif not stat.S_ISDIR(st.st_mode):
                    raise PathNotFound(
                        f"{shown(path)}: {shown('/'.join([*done, name]))} is not a directory"
                    )
                try:
                    inner = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in _RACED:
                        raise _Raced from None
                    raise
                os.close(fd)
                fd = inner
                done.append(name)
            return fd, None, tuple(done)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise

    def open_file(self, path: str) -> tuple[int, str, os.stat_result]:
        """Open the regular file at ``path`` for reading: its descriptor (the caller closes
        it), resolved path and status."""
        for _ in range(RETRIES):
            with self.locate(path) as location:
                if location.name is None:
                    raise NotAFile(f"{shown(path)} is a directory, not a file")
                try:
                    fd = os.open(location.name, FILE_FLAGS, dir_fd=location.dir_fd)
                except FileNotFoundError:
                    raise PathNotFound(f"{shown(location.rel)} does not exist") from None
                except OSError as exc:
                    if exc.errno == errno.ELOOP:  # became a link since it was resolved
                        continue
                    raise
                try:
                    status = os.fstat(fd)
                    if stat.S_ISDIR(status.st_mode):
                        raise NotAFile(f"{shown(location.rel)} is a directory, not a file")
                    if not stat.S_ISREG(status.st_mode):
                        raise NotAFile(f"{shown(location.rel)} is not a regular file")
                    self.verify(fd, location.rel)
                except BaseException:
                    os.close(fd)
                    raise
                return fd, location.rel, status
        raise WorkspaceError(f"{shown(path)} kept changing while it was opened; try again")
