"""``glob`` and ``grep``: walks of a directory under a workspace root.

The walk holds a descriptor per level and opens each subdirectory relative to its parent
with ``O_NOFOLLOW``: it never follows a symbolic link (a link is listed by ``glob`` under its
own name, never descended into nor read by ``grep``), so it cannot leave the root nor loop.
Blocking functions, run in a worker process by the tools (``tether/tools/_pool.py``).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tether.tools._errors import (
    InvalidPath,
    InvalidPattern,
    NotAFile,
    PathNotFound,
    PathOutsideRoot,
    WorkspaceError,
)
from tether.tools._files import SNIFF_BYTES, Limits
from tether.tools._paths import DIR_FLAGS, FILE_FLAGS, Root, _lstat_at, shown
from tether.tools._regex import LineSearch

__all__ = ("DEFAULT_IGNORE", "glob_paths", "glob_regex", "grep_files")

DEFAULT_IGNORE = (".git", ".hg", ".svn", ".venv", "node_modules", "__pycache__")
MAX_DEPTH = 64
MAX_ENTRIES = 200_000
"""Entries a walk visits at most: a huge tree is searched in part, and the result says so."""
MAX_RESULTS = 1000
MAX_MATCHES = 500
MAX_LINE_CHARS = 500


@dataclass(frozen=True, slots=True)
class _Entry:
    rel: str  # from the walk's start
    kind: str  # "dir", "file", "link" or "other"
    dir_fd: int  # the directory holding it, open while the entry is being looked at
    name: str


class _Walk:
    """A depth-first walk in name order, bounded by depth and by entries visited."""

    def __init__(self, ignore: frozenset[str], depth: int) -> None:
        self.ignore = ignore
        self.depth = depth
        self.budget = MAX_ENTRIES
        self.partial = False

    def entries(self, fd: int, prefix: str = "", depth: int = 1) -> Iterator[_Entry]:
        try:
            with os.scandir(fd) as listing:
                found = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            return  # unreadable, or gone meanwhile
        for entry in found:
            if self.budget <= 0:
                self.partial = True
                return
            self.budget -= 1
            try:
                if entry.is_symlink():
                    kind = "link"
                elif entry.is_dir(follow_symlinks=False):
                    kind = "dir"
                elif entry.is_file(follow_symlinks=False):
                    kind = "file"
                else:
                    kind = "other"
            except OSError:
                continue
            rel = prefix + entry.name
            yield _Entry(rel, kind, fd, entry.name)
            if kind != "dir" or entry.name in self.ignore or depth >= self.depth:
                continue
            try:
                inner = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # replaced by a link or a file since the listing, or unreadable
            try:
                yield from self.entries(inner, rel + "/", depth + 1)
            finally:
                os.close(inner)


@contextmanager
def _start(root: Root, path: str) -> Iterator[tuple[int, str, str | None]]:
    """The directory to search from (a descriptor), its path from the root, and the file
    name when ``path`` is a single file in it."""
    with root.locate(path) as location:
        if location.name is None:
            yield location.dir_fd, location.rel, None
            return
        try:
            status = _lstat_at(location.name, location.dir_fd)
        except FileNotFoundError:
            raise PathNotFound(f"{shown(location.rel)} does not exist") from None
        if stat.S_ISREG(status.st_mode):
            yield location.dir_fd, location.parent_rel, location.name
            return
        if not stat.S_ISDIR(status.st_mode):
            raise NotAFile(f"{shown(location.rel)} is neither a directory nor a regular file")
        try:
            fd = os.open(location.name, DIR_FLAGS, dir_fd=location.dir_fd)
        except OSError as exc:
            problem = f"{shown(location.rel)} cannot be opened: {exc.strerror}"
            raise WorkspaceError(problem) from None
        try:
            root.verify(fd, location.rel)
            yield fd, location.rel, None
        finally:
            os.close(fd)


def _class(body: str) -> str:
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    escaped = "".join("\\" + c if c in "\\[]&~|" else c for c in body)
    return "(?!/)[" + ("^" if negate else "") + escaped + "]"


def _segment(segment: str) -> str:
    """One component's glob: its ``*`` runs cut it into pieces of one-character tokens."""
    pieces: list[list[str]] = [[]]
    i = 0
    while i < len(segment):
        c = segment[i]
        i += 1
        if c == "*":
            while i < len(segment) and segment[i] == "*":
                i += 1
            pieces.append([])
        elif c == "?":
            pieces[-1].append("[^/]")
        elif c == "[":
            end = i + (1 if segment[i : i + 1] in ("!", "^") else 0)
            end += 1 if segment[end : end + 1] == "]" else 0
            end = segment.find("]", end)
            if end == -1:
                pieces[-1].append(re.escape(c))
            else:
                pieces[-1].append(_class(segment[i:end]))
                i = end + 1
        else:
            pieces[-1].append(re.escape(c))
    texts = ["".join(piece) for piece in pieces]
    if len(texts) == 1:
        return texts[0]
    first, *middle, last = texts
    # A piece between two stars is taken where it first occurs, for good (an atomic group):
    # if any choice lets the rest match, the first does, since the next star takes up the
    # gap. Plain `[^/]*` for each star backtracks over every split of the name (`*a*a*a*b`
    # against 200 a's: O(n^4) and more), and a thread matching it held the GIL for minutes.
    return first + "".join(f"(?>[^/]*?{piece})" for piece in middle) + "[^/]*" + last


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regular expression over ``/``-separated paths: ``*`` and ``?`` stay in a
    component, ``[abc]``/``[!abc]`` are classes, a ``**`` component spans any number of
    directories (none included). Matching takes time polynomial in the path and the pattern
    (a star's piece, or a ``**``'s components, is taken where it first occurs)."""
    if "\x00" in pattern:
        raise InvalidPath("the pattern contains a NUL byte")
    if pattern.startswith("/"):
        raise PathOutsideRoot(f"the pattern {shown(pattern)} is absolute: make it relative")
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise PathOutsideRoot(f"the pattern {shown(pattern)} contains '..'")
    if not parts:
        raise InvalidPath("the pattern is empty")
    final = max((index for index, part in enumerate(parts) if part == "**"), default=-1)
    out = []
    taken = False  # within a `**` whose components are taken where they first occur
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(")" if taken else "")
            taken = not last and index < final
            out.append(".*" if last else "(?>(?:[^/]*/)*?" if taken else "(?:[^/]*/)*")
            continue
        out.append(_segment(part))
        if not last:
            out.append("/")
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error as exc:  # a class such as [z-a]
        raise InvalidPattern(f"invalid glob {shown(pattern)}: {exc}") from None


def _depth(pattern: str) -> int:
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    return MAX_DEPTH if "**" in parts else len(parts)


def _joined(base: str, rel: str) -> str:
    return rel if base == "." else f"{base}/{rel}"


def _capped(lines: list[str], limit: int) -> tuple[list[str], bool]:
    kept: list[str] = []
    used = 0
    for line in lines:
        used += len(line.encode()) + 1
        if used > limit:
            return kept, True
        kept.append(line)
    return kept, False


def glob_paths(root: Root, pattern: str, path: str, limits: Limits, ignore: frozenset[str]) -> str:
    """The paths under ``path`` that match ``pattern`` (relative to ``path``), one a line,
    relative to the root, in name order; directories end with ``/``."""
    regex = glob_regex(pattern)
    found: list[str] = []
    more = False
    with _start(root, path) as (fd, base, single):
        if single is not None:
            raise NotAFile(f"{shown(path)} is a file: glob searches a directory")
        walk = _Walk(ignore, _depth(pattern))
        for entry in walk.entries(fd):
            if regex.fullmatch(entry.rel):
                if len(found) == MAX_RESULTS:
                    more = True
                    break
                found.append(_joined(base, entry.rel) + ("/" if entry.kind == "dir" else ""))
    if not found:
        return f"no paths under {base} match {shown(pattern)}" + (
            " (the walk stopped early: the tree is too large)" if walk.partial else ""
        )
    kept, cut = _capped(found, limits.output_bytes)
    notes = []
    if more or cut:
        notes.append(
            f"truncated: the first {len(kept)} paths shown; narrow the pattern or the path"
        )
    if walk.partial:
        notes.append(f"the walk stopped after {MAX_ENTRIES} entries")
    return "\n".join(kept + [f"[{note}]" for note in notes])


def _text_of(dir_fd: int, name: str, limit: int) -> tuple[bytes, str] | None:
    """A file's bytes and text, or ``None`` for one to skip (binary, too large, gone, a
    non-file)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            return None
        chunks, held = [], 0
        while held <= limit and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            held += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit or b"\x00" in data[:SNIFF_BYTES]:
        return None
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def grep_files(
    root: Root,
    pattern: str,
    path: str,
    glob: str | None,
    ignore_case: bool,
    limits: Limits,
    ignore: frozenset[str],
) -> str:
    """Lines matching the regular expression ``pattern`` in the text files under ``path``
    (or that file), as ``path:line:text``; binary and over-large files are skipped."""
    search = LineSearch(pattern, ignore_case=ignore_case)
    names = glob_regex(glob) if glob else None
    by_name = glob is not None and "/" not in glob.strip("/")
    lines: list[str] = []
    used, files, skipped, more = 0, 0, 0, False
    with _start(root, path) as (fd, base, single):
        walk = _Walk(ignore, MAX_DEPTH)
        if single is not None:
            candidates: Iterator[_Entry] = iter([_Entry(single, "file", fd, single)])
        else:
            candidates = walk.entries(fd)
        for entry in candidates:
            if entry.kind != "file":
                continue
            if names is not None and not names.fullmatch(entry.name if by_name else entry.rel):
                continue
            content = _text_of(entry.dir_fd, entry.name, limits.file_bytes)
            if content is None:
                skipped += 1
                continue
            files += 1
            shown_as = _joined(base, entry.rel)
            for number, line in search.lines(*content):
                line = line.removesuffix("\r")
                if len(line) > MAX_LINE_CHARS:
                    line = line[:MAX_LINE_CHARS] + " [...]"
                hit = f"{shown_as}:{number}:{line}"
                used += len(hit.encode()) + 1
                if len(lines) == MAX_MATCHES or used > limits.output_bytes:
                    more = True
                    break
                lines.append(hit)
            if more:
                break
    notes = []
    if more:
        notes.append(
            f"truncated: the first {len(lines)} matches shown; narrow the pattern, the path or "
            "the glob"
        )
    if skipped:
        notes.append(f"{skipped} binary, over-large or unreadable files skipped")
    if walk.partial:
        notes.append(f"the walk stopped after {MAX_ENTRIES} entries")
    if not lines:
        head = f"no matches for {shown(pattern)} in {files} files under {base}"
        return head + "".join(f" [{note}]" for note in notes)
    return "\n".join(lines + [f"[{note}]" for note in notes])
