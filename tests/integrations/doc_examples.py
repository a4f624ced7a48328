"""The Python examples of a docs page, run as they are written (issue 36 item 3).

The tests read the examples from the page itself, so a page and its tests cannot drift apart.
A test names the example it runs by a phrase only that example holds
(``page.example("def build(model, tools):")``), and each page's test module checks that every
example of the page is named by one of its tests (``page.unclaimed(...)``).
:func:`run_example` runs an example in a namespace as the asyncio REPL would (top-level
``await`` and ``async for`` allowed), so the examples of a page build on one another, as a
reader's session does; the namespace also gives what the page leaves to the reader (its
``shop``, ``send``, ``my_tracer``). A ``pycon`` example is a session of ``>>>`` statements,
each with the output it shows (:func:`pycon_session`).
"""

import ast
import inspect
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ("Example", "Page", "pycon_session", "run_example")

DOCS = Path(__file__).resolve().parents[2] / "docs"
_FENCED = re.compile(r"^```(python|pycon)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Example:
    language: str
    """``python`` or ``pycon``."""
    code: str


class Page:
    """The fenced ``python`` and ``pycon`` examples of ``docs/<name>``, in page order."""

    def __init__(self, name: str) -> None:
        self.name = name
        text = (DOCS / name).read_text()
        self.examples = [Example(language, code) for language, code in _FENCED.findall(text)]

    def example(self, phrase: str) -> str:
        """The code of the one example that holds ``phrase``."""
        found = [e.code for e in self.examples if phrase in e.code]
        assert len(found) == 1, f"{self.name}: {len(found)} examples hold {phrase!r}"
        return found[0]

    def unclaimed(self, phrases: Collection[str]) -> list[str]:
        """The examples none of ``phrases`` names (each should be some test's)."""
        return [e.code for e in self.examples if not any(p in e.code for p in phrases)]


async def run_example(code: str, namespace: dict[str, Any], name: str = "example") -> None:
    """Run ``code`` in ``namespace``, awaiting it if it awaits at its top level."""
    namespace.setdefault("__name__", name)  # what a class or a function defined there reports
    compiled = compile(code, f"<{name}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    outcome = eval(compiled, namespace)  # an example's code, which the test means to run
    if compiled.co_flags & inspect.CO_COROUTINE:
        await outcome


def pycon_session(code: str) -> list[tuple[str, str]]:
    """A ``pycon`` example's statements (``>>>`` and ``...`` lines), each with the output it
    shows."""
    session: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith(">>> "):
            session.append((line[4:], []))
        elif line.startswith("... ") and session:
            session[-1] = (f"{session[-1][0]}\n{line[4:]}", session[-1][1])
        elif session:
            session[-1][1].append(line)
    return [(source, "\n".join(output)) for source, output in session]
