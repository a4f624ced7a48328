"""A missing extra is named with a command that installs it: Tether is installed from a
checkout, and no registry has a ``tether`` package to take ``pip install 'tether[postgres]'``."""

from __future__ import annotations

import re
import shlex
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tether._extras import install_hint
from tether.models import EchoModel, ModelConfigError, model_from_env
from tether.store import open_store

ROOT = Path(__file__).resolve().parent.parent
FROM_A_REGISTRY = re.compile(r"""pip install\s+['"]?tether\[""")


def _requirements(extra: str) -> set[str]:
    return {
        line.partition(";")[0].strip()
        for line in metadata.requires("tether") or []
        if re.search(rf"""extra\s*==\s*["']{re.escape(extra)}["']""", line)
    }


def _works(hint: str, extra: str) -> None:
    """``hint`` installs ``extra`` by its own packages, or from the checkout, never as a
    ``tether`` distribution from a registry."""
    assert not FROM_A_REGISTRY.search(hint), hint
    assert f"pip install -e '.[{extra}]'" in hint, hint
    command = hint.partition(f"needs the {extra} extra: ")[2].partition(" (or, ")[0]
    words = shlex.split(command)
    assert words[:2] == ["pip", "install"], hint
    assert set(words[2:]) == _requirements(extra), hint


@pytest.mark.parametrize("extra", ["postgres", "otel", "pydantic-ai"])
def test_the_hint_names_the_extras_packages_and_the_checkouts_command(extra: str) -> None:
    _works(install_hint(extra), extra)


def test_an_extra_no_metadata_declares_is_installed_from_the_checkout() -> None:
    assert install_hint("nothing") == (
        "needs the nothing extra: pip install -e '.[nothing]' from a checkout of Tether"
    )


async def test_a_postgresql_url_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tether.store.postgres", None)  # as if psycopg were absent
    with pytest.raises(ValueError) as raised:
        await open_store("postgresql://tether@127.0.0.1:1/tether")
    _works(str(raised.value).partition(": No module")[0].partition("' ")[2], "postgres")


def test_a_model_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tether.models.pydantic_ai", None)
    # A name no other test resolves: a process keeps the model of a name it resolved.
    with pytest.raises(ModelConfigError) as raised:
        model_from_env(EchoModel(), environ={"TETHER_MODEL": "openai:without-the-extra"})
    message = str(raised.value)
    _works(message.partition(": ")[2].partition(": No module")[0], "pydantic-ai")


def test_no_page_or_message_installs_tether_from_a_registry() -> None:
    places = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "src").rglob("*.py")]
    places += [*(ROOT / "examples").rglob("*.py"), *(ROOT / "examples").rglob("*.md")]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in places
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if FROM_A_REGISTRY.search(line)
    ]
    assert not found, "\n".join(found)
