import os
from pathlib import Path

import pytest

import tether.tools._pool as pool_module
from tether.tools import workspace

from .support import SECRET, InProcess, Tools, sandbox_missing


@pytest.fixture(autouse=True)
def _sandbox_available() -> None:
    """``workspace(root)`` makes ``bash``'s bwrap sandbox, and raises where it cannot. CI
    installs bubblewrap (``.ci/run``), so there a missing sandbox fails these tests;
    elsewhere they are skipped with the reason."""
    missing = sandbox_missing()
    if missing is not None and not os.environ.get("CI"):
        pytest.skip(missing)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, holding what no file tool may reach."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text(SECRET)
    (directory / "sub").mkdir()
    (directory / "sub" / "secret.txt").write_text(SECRET)
    return directory


@pytest.fixture
def root(tmp_path: Path, outside: Path) -> Path:
    directory = tmp_path / "ws"
    directory.mkdir()
    return directory


@pytest.fixture
def tools(root: Path) -> Tools:
    return Tools(workspace(root, bash_timeout=30, kill_grace=1.0))


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The file tools' work done in the test's process instead of a worker's."""
    monkeypatch.setattr(pool_module, "shared_pool", InProcess)
