"""``tether serve`` refuses an empty token as it refuses a missing one (issue 18, item 10),
and auth options that contradict each other or miss a part (issue 39), before anything
starts."""

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
    assert "without --auth" in result.output, result.output
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--auth", "tokens", "--auth-token", "t"], "--auth-token is the shared token"),
        (["--auth", "token"], "--auth token needs --auth-token"),
        (["--jwks", "http://127.0.0.1:1/jwks.json"], "--jwks is for --auth jwt"),
        (["--auth", "jwt"], "--jwks URL or --jwt-key (one of them)"),
        (["--auth", "jwt", "--jwks", "http://x/", "--jwt-key", "k"], "one of them"),
        (["--auth", "jwt", "--jwt-key", "@/nonexistent/key.pem"], "cannot read the key"),
        (["--auth", "oauth"], "'oauth' is none of token, tokens, jwt"),
        (["--auth", "tether.auth:nothing_here"], "has no 'nothing_here'"),
        (["--auth", "tether.auth:ALL_SCOPES"], "tuple is not a function"),
    ],
)
def test_auth_options_that_do_not_fit_are_refused_before_anything_starts(
    options: list[str], said: str, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path}/data"
    result = CliRunner().invoke(app, ["serve", "--demo", "--store", store, *options], env={})
    assert result.exit_code != 0
    assert said in " ".join(result.output.split()), result.output
    assert not (tmp_path / "data").exists()
