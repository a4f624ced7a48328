"""``TETHER_FAILPOINTS`` that does not parse stops ``tether serve`` and ``tether worker`` with
one line and exit 2, before the store is opened (docs/testing.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tether._failpoints import ARMED, disarm
from tether.cli import app
from tether.cli._exit import ExitCode


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["worker"]])
def test_a_bad_spec_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("TETHER_FAILPOINTS", "store.append=error; store.apend=crash")
    store = tmp_path / "never-made"
    try:
        result = CliRunner().invoke(app, [*command, "--demo", "--store", f"sqlite:///{store}"])
    finally:
        disarm()
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "TETHER_FAILPOINTS entry 'store.apend=crash': unknown failpoint" in result.output
    assert "Traceback" not in result.output
    assert not store.exists() and not ARMED
