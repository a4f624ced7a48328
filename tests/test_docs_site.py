"""The documentation site (mkdocs.yml) builds under ``--strict``: a missing page, a broken
link or anchor, or a docstring the API reference cannot render fails the suite, not only CI.

The build reads the docstrings statically (griffe) and fetches nothing, so it runs offline
in a few seconds.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .test_public_api import PUBLIC

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"


# A few seconds idle, and CI's one build of the site (.ci/run builds none of its own): bounded
# well past the 100 s a loaded 2-core machine has taken.
@pytest.mark.timeout(300)
def test_the_docs_site_builds_without_a_warning(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("mkdocs is not installed: pip install -e '.[dev]' (or '.[docs]')")
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=270,
    )
    assert built.returncode == 0, built.stderr
    assert (site / "index.html").is_file()
    assert (site / "reference" / "engine" / "index.html").is_file()


def test_every_public_package_has_an_api_reference_page() -> None:
    documented = {
        target
        for page in REFERENCE.glob("*.md")
        for target in re.findall(r"^::: (\S+)$", page.read_text(), re.MULTILINE)
    }
    assert set(PUBLIC) <= documented, sorted(set(PUBLIC) - documented)


def _curl_commands(text: str) -> list[str]:
    """Every ``curl`` command in ``text``, its continued lines joined (a Python docstring's
    ``\\\\`` too)."""
    joined = re.sub(r"\\{1,2}\n\s*", " ", text)
    return [line[line.index("curl ") :] for line in joined.splitlines() if "curl " in line]


def test_every_curl_post_in_the_docs_says_json() -> None:
    """The server takes a POST only with ``Content-Type: application/json`` (a bodiless one
    too; docs/serving.md): a copied command must work."""
    pages = [
        ROOT / "README.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "examples").rglob("README.md"),
        *(ROOT / "examples").rglob("*.py"),
    ]
    posts = {
        f"{page.relative_to(ROOT)}: {command}"
        for page in pages
        for command in _curl_commands(page.read_text())
        if re.search(r"-X ?POST|\s-d\s|--data", command)
    }
    assert len(posts) > 20, posts  # what the check reads: the docs' commands
    unlabelled = sorted(p for p in posts if "content-type: application/json" not in p.lower())
    assert not unlabelled, "\n".join(unlabelled)
