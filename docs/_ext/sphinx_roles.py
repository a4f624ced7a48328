"""A griffe extension for the API reference: Tether's docstrings are written in a reST
flavour (``:class:`Record```, ``Example::`` before an indented block); the site renders
docstrings as Markdown. This rewrites the two constructs, nothing else:

- a role (``:class:`~tether.journal.ToolExecutor```) becomes inline code of its target
  (``ToolExecutor``: a leading ``~`` keeps the last name only);
- a line ending in ``::`` followed by an indented block becomes the line ending in ``:``
  followed by a fenced code block (Python, or shell for a command line).

Loaded by mkdocs.yml (``plugins.mkdocstrings.handlers.python.options.extensions``).
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from griffe import Extension, Object

ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj|const|py:\w+):`(~?)([^`]+)`")
SHELL = re.compile(r"^(\$ |tether |curl |pip |python3? -m )")


def _role(match: re.Match[str]) -> str:
    target = match.group(2)
    if match.group(1):
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def literal_blocks(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and i + 1 < len(lines) and not lines[i + 1].strip():
            margin = _indent(line)
            start = i + 1
            while start < len(lines) and not lines[start].strip():
                start += 1
            end = start
            while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > margin):
                end += 1
            while end > start and not lines[end - 1].strip():
                end -= 1
            if end > start:
                body = textwrap.dedent("\n".join(lines[start:end])).split("\n")
                language = "sh" if SHELL.match(body[0]) else "python"
                pad = " " * margin
                head = line.rstrip()[:-1]
                if head.strip() != ":":  # a bare "::" introduces a block without a colon
                    out += [head, ""]
                out += [f"{pad}```{language}", *[pad + b if b else "" for b in body], f"{pad}```"]
                i = end
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


def rewrite(text: str) -> str:
    return literal_blocks(ROLE.sub(_role, text))


class SphinxRoles(Extension):
    """Rewrites every docstring as it is loaded (before mkdocstrings parses it)."""

    def on_instance(self, *, obj: Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
