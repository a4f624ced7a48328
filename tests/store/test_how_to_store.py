"""docs/how-to/store.md is generated from the store's protocols (docs/_ext/store_doc.py):
the page checked in is the page they make, so it lists every method there is."""

import importlib.util
from pathlib import Path

from tether.store import CAPABILITIES, LogStore, Store, SubmissionStore, WaitStore

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "_ext" / "store_doc.py"


def _generator() -> object:
    spec = importlib.util.spec_from_file_location("store_doc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_the_one_the_protocols_make() -> None:
    generator = _generator()
    page: Path = generator.PAGE  # type: ignore[attr-defined]
    assert page.read_text() == generator.generate(), (  # type: ignore[attr-defined]
        "docs/how-to/store.md is stale: run .venv-test/bin/python docs/_ext/store_doc.py"
    )


def test_the_page_names_every_method_of_every_protocol() -> None:
    page = (SCRIPT.parents[1] / "how-to" / "store.md").read_text()
    for protocol in (LogStore, SubmissionStore, Store, WaitStore, *CAPABILITIES.values()):
        assert f"`{protocol.__name__}`" in page
        for name, member in vars(protocol).items():
            if callable(member) and not name.startswith("_"):
                assert f"| `{name}(" in page, f"{protocol.__name__}.{name}"
