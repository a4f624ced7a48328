"""``tether serve`` refuses an empty token as it refuses a missing one (issue 18, item 10)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tether.cli import app


@pytest.mark.parametrize("token", ["", "  "])
def test_an_empty_auth_token_is_refused_before_anything_starts(token: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/data"
    result = CliRunner().invoke(
        app, ["serve", "--demo", "--store", store, "--auth-token", token], env={}
    )
    assert result.exit_code != 0
    assert "empty" in result.output, result.output
    assert not (tmp_path / "data").exists()


def test_an_empty_token_variable_counts_as_none(tmp_path: Path) -> None:
    # click reads TETHER_AUTH_TOKEN="" as unset: a public address is refused as without one.
    store = f"sqlite:///{tmp_path}/data"
    result = CliRunner().invoke(
        app,
        ["serve", "--demo", "--store", store, "--host", "0.0.0.0"],
        env={"TETHER_AUTH_TOKEN": ""},
    )
    assert result.exit_code != 0
    assert "without --auth-token" in result.output, result.output
    assert not (tmp_path / "data").exists()
