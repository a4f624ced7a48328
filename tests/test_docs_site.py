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

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"


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
        timeout=100,
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
