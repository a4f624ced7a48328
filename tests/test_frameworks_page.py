"""docs/frameworks.md, the table of what each framework feature is in Tether, stays true to
the code: every error a cell says a construct is refused with (or raises) is an exception
class of ``tether.errors``, of an integration's package or a builtin; every row has a cell
per framework; every link leads to a page and a section that exist."""

from __future__ import annotations

import builtins
import importlib
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGE = DOCS / "frameworks.md"
FRAMEWORKS = ("pydantic-ai", "LangGraph", "OpenAI Agents SDK", "Claude Code", "Codex")
PACKAGES = (
    "tether.errors",
    "tether.integrations",
    "tether.integrations.pydantic_ai",
    "tether.integrations.langgraph",
    "tether.integrations.openai_agents",
    "tether.integrations.claude_code",
    "tether.integrations.codex",
)
REFUSED = re.compile(r"\*\*refused\*\*[^(|]*\(`(\w+)`|raises `(\w+)`|\(`(\w+)` at registration")


def _rows() -> list[list[str]]:
    lines = [line for line in PAGE.read_text().splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


def _errors() -> set[str]:
    text = PAGE.read_text()
    return {name for match in REFUSED.finditer(text) for name in match.groups() if name}


def test_the_table_has_a_column_per_framework_and_a_cell_in_each() -> None:
    header, *rows = _rows()
    assert header == ["Feature", *FRAMEWORKS]
    assert len(rows) >= 12
    for row in rows:
        assert len(row) == 1 + len(FRAMEWORKS), row[0]
        assert all(row), row[0]


def test_the_page_names_the_refusals() -> None:
    assert {"UnsupportedConstruct", "NotJournaled", "NotInTurn"} <= _errors()


@pytest.mark.parametrize("name", sorted(_errors()))
def test_every_error_named_is_an_exception_class_tether_or_python_has(name: str) -> None:
    found = [getattr(importlib.import_module(p), name, None) for p in PACKAGES]
    found.append(getattr(builtins, name, None))
    classes = [c for c in found if isinstance(c, type) and issubclass(c, BaseException)]
    assert classes, f"docs/frameworks.md names {name}, which no Tether package exports"


def _slug(heading: str) -> str:
    """A heading's anchor as the docs site makes it (Python-Markdown's toc slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading.lower()).strip()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)
    return {_slug(h) for h in headings}


def test_every_link_leads_to_a_section_that_exists() -> None:
    links = re.findall(r"\]\(([\w-]+\.md)(?:#([\w-]+))?\)", PAGE.read_text())
    assert len(links) >= 30
    for page, anchor in links:
        target = DOCS / page
        assert target.exists(), page
        if anchor:
            assert anchor in _anchors(target), f"{page}#{anchor}"
