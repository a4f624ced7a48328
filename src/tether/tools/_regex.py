"""``grep``'s patterns: the lines of a file that a model-chosen regular expression matches.

A pattern is Python's syntax (it must compile with :mod:`re`, or it is
:class:`InvalidPattern`). Where RE2 (the ``google-re2`` package, the ``re2`` extra) is
installed and reads the pattern as :mod:`re` does, RE2 searches: its time is linear in the
text, so no pattern backtracks. The rest (what RE2 lacks: backreferences, lookaround,
atomic groups, possessive repeats, ``(?x)``), and every pattern where RE2 is not installed,
run on :mod:`re`, whose backtracking only the deadline of the worker process bounds (see
``tether/tools/_pool.py``).

RE2 searches a file whole, not line by line: its Python binding costs about 20 µs a call,
more than :mod:`re` takes for a line, while one search of the file's bytes costs one call
(``benchmarks/workspace_search.py``). The search keeps grep's per-line meaning with RE2's
``never_nl`` (no match spans a line end) and ``(?m)`` (``^`` and ``$`` at line ends).

Where the two engines would read a pattern differently, :mod:`re` runs it: ``\\A`` (a line's
start to :mod:`re`, line by line; the file's start to a whole-file search) and ``{,n}``
(``{0,n}`` to :mod:`re`, literal text to RE2). What is left: RE2's ``\\d``, ``\\w``, ``\\s``
and ``\\b`` are ASCII-only, and it reads ``[[:alpha:]]`` as a POSIX class.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

from tether.tools._errors import InvalidPattern
from tether.tools._paths import shown

__all__ = ("RE2", "LineSearch")


def _load_re2() -> Any:
    try:
        return importlib.import_module("re2")
    except ImportError:
        return None


RE2: Any = _load_re2()
"""The ``re2`` module of ``google-re2``, or ``None`` where it is not installed."""

_READ_OTHERWISE = ("\\A", "{,")
"""Pattern text that RE2, searching a whole file, would read otherwise than :mod:`re`."""


def _compile_re2(pattern: str, ignore_case: bool) -> Any:
    """The pattern for a whole-file RE2 search, or ``None`` where RE2 cannot run it."""
    if RE2 is None or any(text in pattern for text in _READ_OTHERWISE):
        return None
    options = RE2.Options()
    options.log_errors = False  # a refused pattern goes to re, not to the worker's stderr
    options.never_nl = True
    options.case_sensitive = not ignore_case
    try:
        return RE2.compile(("(?m)" + pattern).encode("utf-8", "surrogatepass"), options)
    except RE2.error:
        return None


class LineSearch:
    """A pattern searched line by line (lines split at ``\\n``), on RE2 where it can.

    Example::

        search = LineSearch("TODO", ignore_case=False)
        data = b"a\\nTODO b\\n"
        assert list(search.lines(data, data.decode())) == [(2, "TODO b")]
    """

    def __init__(self, pattern: str, *, ignore_case: bool) -> None:
        try:
            self._python = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except (re.error, OverflowError, RecursionError, ValueError) as exc:
            raise InvalidPattern(f"invalid regular expression {shown(pattern)}: {exc}") from None
        self._re2 = _compile_re2(pattern, ignore_case)

    @property
    def engine(self) -> str:
        """``"re2"`` or ``"re"``: which engine searches."""
        return "re" if self._re2 is None else "re2"

    def lines(self, data: bytes, text: str) -> Iterator[tuple[int, str]]:
        """The number (1-based) and text of each line that matches, in order; ``text`` is
        ``data`` decoded."""
        if self._re2 is None:
            for number, line in enumerate(text.split("\n"), 1):
                if self._python.search(line):
                    yield number, line
            return
        pos, number, counted = 0, 1, 0
        while (found := self._re2.search(data, pos)) is not None:
            start = data.rfind(b"\n", 0, found.start()) + 1
            number += data.count(b"\n", counted, start)
            counted = start
            end = data.find(b"\n", found.end())
            if end == -1:
                end = len(data)
            yield number, data[start:end].decode("utf-8")
            if end == len(data):
                return
            pos = end + 1
