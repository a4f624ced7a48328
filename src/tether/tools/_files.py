"""``read``, ``write`` and ``edit``: UTF-8 text files under a workspace root.

Blocking functions (the tools run them in a thread); every path goes through
:class:`~tether.tools._paths.Root`, every write is a temporary file renamed over the target.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tether.tools._errors import (
    BinaryFile,
    EditMismatch,
    FileChanged,
    FileTooLarge,
    NotAFile,
    WorkspaceError,
)
from tether.tools._paths import Root, _lstat_at, shown

if TYPE_CHECKING:  # not at run time: a worker process starts without pydantic
    from pydantic import JsonValue

__all__ = ("Limits", "apply_edit", "plan_edit", "read_text", "write_text")

SNIFF_BYTES = 8192
"""A NUL byte in a file's first 8 KiB marks it binary (git's rule)."""
_MAX_COUNTED = 1000
_TMP_PREFIX = ".tether-write-"


@dataclass(frozen=True, slots=True)
class Limits:
    """The workspace's size caps, in bytes (see :func:`tether.tools.workspace`)."""

    read_bytes: int
    write_bytes: int
    file_bytes: int
    output_bytes: int


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def decode(data: bytes, rel: str, doing: str) -> str:
    """The text of a file's bytes, or :class:`BinaryFile`."""
    if b"\x00" in data[:SNIFF_BYTES]:
        raise BinaryFile(f"{shown(rel)} looks binary (a NUL byte in its first 8 KiB): not {doing}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BinaryFile(
            f"{shown(rel)} is not UTF-8 text (an invalid byte at offset {exc.start}): not {doing}"
        ) from None


def load(root: Root, path: str, limit: int, doing: str) -> tuple[str, bytes, str]:
    """A text file's resolved path, bytes and text; refuses one over ``limit`` bytes."""
    fd, rel, status = root.open_file(path)
    try:
        if status.st_size > limit:
            raise FileTooLarge(
                f"{shown(rel)} is {_size(status.st_size)}; files over {_size(limit)} are not "
                f"{doing} (grep it, or look at part of it with bash: head, sed -n)"
            )
        chunks, held = [], 0
        while chunk := os.read(fd, 1 << 20):
            held += len(chunk)
            if held > limit:  # it grew since the fstat
                raise FileTooLarge(f"{shown(rel)} grew past {_size(limit)} while it was read")
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return rel, data, decode(data, rel, doing)


def _lines(text: str) -> list[str]:
    """Lines with their ``\\n`` (split on ``\\n`` only, as grep counts them)."""
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    return [*lines, pieces[-1]] if pieces[-1] else lines


def _cut(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 fits ``limit`` bytes."""
    return text.encode()[:limit].decode("utf-8", errors="ignore")


def read_text(root: Root, path: str, offset: int, limit: int | None, limits: Limits) -> str:
    """Lines ``offset`` (1-based) to ``offset + limit - 1`` of a text file, at most
    ``limits.read_bytes`` of them; a cut is said in a last line in brackets."""
    rel, _, text = load(root, path, limits.file_bytes, "read")
    lines = _lines(text)
    start = offset - 1
    if start >= len(lines) and start > 0:
        return f"[{rel} has {len(lines)} lines; offset {offset} is past its end]"
    chosen = lines[start : start + limit if limit is not None else None]
    out: list[str] = []
    used = 0
    for line in chosen:
        size = len(line.encode())
        if used + size > limits.read_bytes:
            if not out:  # one line longer than the whole cap
                out.append(_cut(line, limits.read_bytes) + "\n")
                return "".join(out) + (
                    f"[line {offset} of {rel} is cut at {_size(limits.read_bytes)}; "
                    "bash can show more of it: cut -c, fold]"
                )
            last = start + len(out)
            return "".join(out) + (
                f"[cut at {_size(limits.read_bytes)}: lines {offset}-{last} of {len(lines)} "
                f"shown; read on with offset={last + 1}]"
            )
        out.append(line)
        used += size
    return "".join(out)


def _tmp_name() -> str:
    return f"{_TMP_PREFIX}{secrets.token_hex(8)}.tmp"


def replace_file(root: Root, path: str, data: bytes) -> str:
    """Write ``data`` as the file at ``path`` (made, with its parent directories, if need
    be): a temporary file in the resolved directory, fsynced, renamed over the target. The
    file's permission bits are kept. Returns the resolved path."""
    for _ in range(3):
        with root.locate(path, create_dirs=True) as location:
            if location.name is None:
                raise NotAFile(f"{shown(path)} is a directory, not a file")
            try:
                status: os.stat_result | None = _lstat_at(location.name, location.dir_fd)
            except FileNotFoundError:
                status = None
            if status is not None and stat.S_ISLNK(status.st_mode):
                continue  # became a link since it was resolved: resolve again
            if status is not None and stat.S_ISDIR(status.st_mode):
                raise NotAFile(f"{shown(location.rel)} is a directory, not a file")
            if status is not None and not stat.S_ISREG(status.st_mode):
                raise NotAFile(f"{shown(location.rel)} is not a regular file")
            tmp = _tmp_name()
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o666, dir_fd=location.dir_fd)
            try:
                try:
                    if status is not None:
                        os.fchmod(fd, stat.S_IMODE(status.st_mode))
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                dir_fd = location.dir_fd
                os.rename(tmp, location.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=location.dir_fd)
                except OSError:
                    pass
                raise
            os.fsync(location.dir_fd)
            return location.rel
    raise WorkspaceError(f"{shown(path)} kept changing while it was written; try again")


def write_text(root: Root, path: str, content: str, limits: Limits) -> str:
    data = _encode(content, "content")
    if len(data) > limits.write_bytes:
        raise FileTooLarge(
            f"the content is {_size(len(data))}; "
            f"the limit of a write is {_size(limits.write_bytes)}"
        )
    rel = replace_file(root, path, data)
    return f"wrote {len(data)} bytes to {rel}"


def _encode(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkspaceError(f"the {what} is not valid text (a lone surrogate)") from None


def _occurrences(text: str, sub: str) -> int:
    """How many times ``sub`` occurs in ``text``, overlaps counted (``aa`` is twice in
    ``aaa``: a replace of one of them would be ambiguous), up to ``_MAX_COUNTED``."""
    count, at = 0, text.find(sub)
    while at != -1 and count < _MAX_COUNTED:
        count += 1
        at = text.find(sub, at + 1)
    return count


def _hint(text: str, old: str) -> str:
    if "\r\n" in text and "\n" in old and "\r\n" not in old and old in text.replace("\r\n", "\n"):
        return " (the file has CRLF line endings: old_string must have them too)"
    stripped = old.strip()
    if stripped and stripped != old and stripped in text:
        return " (it does match without its leading or trailing whitespace: check indentation)"
    return ""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _replaced(text: str, old: str, new: str, replace_all: bool) -> tuple[str, int]:
    if replace_all:
        return text.replace(old, new), text.count(old)
    return text.replace(old, new, 1), 1


def plan_edit(
    root: Root, path: str, old: str, new: str, replace_all: bool, limits: Limits
) -> dict[str, JsonValue]:
    """Check an edit against the file as it is and describe it (no change made): the
    resolved path, the digests of the file before and after, how many replacements."""
    if not old:
        raise EditMismatch("old_string is empty: to make a new file, use write", matches=0)
    if old == new:
        raise EditMismatch("old_string and new_string are the same: nothing to change", matches=0)
    if len(_encode(new, "new_string")) > limits.write_bytes:
        raise FileTooLarge(f"new_string is over the write limit of {_size(limits.write_bytes)}")
    rel, data, text = load(root, path, limits.file_bytes, "edited")
    count = _occurrences(text, old)
    if count == 0:
        raise EditMismatch(
            f"old_string was not found in {rel} (0 matches){_hint(text, old)}", matches=0
        )
    if count > 1 and not replace_all:
        many = f"{count}+" if count >= _MAX_COUNTED else str(count)
        raise EditMismatch(
            f"old_string matches {many} times in {rel}; it must match exactly once: include "
            "more of the surrounding text, or set replace_all to replace every occurrence",
            matches=count,
        )
    result, replacements = _replaced(text, old, new, replace_all)
    encoded = result.encode()
    if len(encoded) > limits.file_bytes:
        raise FileTooLarge(f"the edited {rel} would be over {_size(limits.file_bytes)}")
    return {
        "path": rel,
        "before": _digest(data),
        "after": _digest(encoded),
        "replacements": replacements,
    }


def apply_edit(
    root: Root, plan: dict[str, JsonValue], old: str, new: str, replace_all: bool, limits: Limits
) -> str:
    """Carry out a planned edit, idempotently: a file already in the planned after-state is
    left alone (the edit ran before a crash), one in the before-state is edited, anything
    else is :class:`FileChanged`. The message is the same either way."""
    rel, after = str(plan["path"]), str(plan["after"])
    message = f"replaced {plan['replacements']} occurrence(s) of old_string in {rel}"
    _, data, text = load(root, rel, limits.file_bytes, "edited")
    digest = _digest(data)
    if digest == after:
        return message
    if digest != plan["before"]:
        raise FileChanged(f"{rel} changed while the edit was being made; read it and edit again")
    encoded = _replaced(text, old, new, replace_all)[0].encode()
    replace_file(root, rel, encoded)
    return message
