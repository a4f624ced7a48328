"""The CLI's help: every option explained, 80 columns wide, no summary cut short, and cheap to
reach (the client commands and ``--help`` never import the server stack)."""

import os
import subprocess
import sys

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from tether.cli import app
from tether.cli._exit import ExitCode
from tether.store import DEFAULT_STORE_URL

from ..processes import free_port
from .command import TETHER, tether
from .conftest import cli_env

pytestmark = pytest.mark.process

_GROUP = typer.main.get_command(app)
assert isinstance(_GROUP, TyperGroup)
COMMAND: TyperGroup = _GROUP
COMMANDS = sorted(COMMAND.commands)

# What a client must not load: the server, the web framework, the engine, the stores, and
# what only reading a log or a stream needs (tether.client loads those once it reads one).
SERVER_STACK = (
    "uvicorn",
    "fastapi",
    "starlette",
    "psycopg",
    "tether.engine",
    "tether.http",
    "tether.store",
    "tether.journal",
    "tether.records",
    "tether.stream",
    "tether.auth",
    "tether.models",
    "tether.agent",
)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_and_argument_has_help(name: str) -> None:
    command = COMMAND.commands[name]
    assert command.help, name
    for param in command.params:
        assert getattr(param, "help", None), f"tether {name} {param.name}: no help text"


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_help_fits_80_columns(name: str | None) -> None:
    args = ["--help"] if name is None else [name, "--help"]
    shown = tether(*args, COLUMNS="80").stdout
    too_wide = [line for line in shown.splitlines() if len(line) > 80]
    assert not too_wide, "\n".join(too_wide)
    assert "…" not in shown  # nothing cut short


def _groups() -> list[tuple[list[str], TyperGroup]]:
    groups: list[tuple[list[str], TyperGroup]] = [([], COMMAND)]
    groups += [
        ([name], command)
        for name, command in COMMAND.commands.items()
        if isinstance(command, TyperGroup)
    ]
    return groups


@pytest.mark.parametrize("columns", [None, "80", "200"], ids=["unset", "80", "200"])
def test_each_command_is_listed_with_its_whole_summary(columns: str | None) -> None:
    """Not a TTY, with COLUMNS unset, 80 or wide: a summary wraps, it is never cut to ``...``."""
    for path, group in _groups():
        done = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": columns})
        assert done.exit_code == 0, done.stderr
        shown = " ".join(done.stdout.split())
        for name, command in group.commands.items():
            summary = command.get_short_help_str(sys.maxsize)
            assert f"{name} {' '.join(summary.split())}" in shown, (path, name, done.stdout)


def test_the_exit_codes_are_listed() -> None:
    shown = tether("--help").stdout
    for code in ExitCode:
        if code is not ExitCode.OK:
            assert f"  {int(code)}  " in shown, code


def _imported(*args: str) -> set[str]:
    """The modules ``tether *args`` imports (``python -X importtime``, through the script)."""
    done = subprocess.run(
        [TETHER, *args],
        capture_output=True,
        text=True,
        env=cli_env(PYTHONPROFILEIMPORTTIME="1"),
        timeout=90,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert lines, done.stderr
    return {line.rsplit("|", 1)[1].strip() for line in lines}


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["send", "--help"],
        ["serve", "--help"],
        ["send", "assistant", "me", "hi", "--wait"],
        ["approvals"],
        ["approve", "a-1", "--decision", "reject"],
        ["tail", "assistant", "me"],
        ["inputs"],
        ["sessions"],
        ["export", "c1"],
        ["webhooks", "list", "--status", "failed"],
    ],
    ids=" ".join,
)
def test_help_and_client_commands_do_not_import_the_server_stack(args: list[str]) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # the client commands fail fast: nobody there
    imported = _imported(*args, *(["--url", down] if "--help" not in args else []))
    assert "tether.cli._main" in imported
    loaded = sorted(
        module
        for module in imported
        if any(module == banned or module.startswith(f"{banned}.") for banned in SERVER_STACK)
    )
    assert loaded == []


def test_the_cli_default_store_is_the_stores_default() -> None:
    from tether.cli._serve import DEFAULT_STORE_URL as CLI_DEFAULT

    assert CLI_DEFAULT == DEFAULT_STORE_URL
    assert os.path.basename(DEFAULT_STORE_URL) == "tether-data"


def test_version_prints_the_installed_packages_version() -> None:
    """One source: pyproject.toml's ``version``, read back from the installed metadata by
    ``tether --version`` and ``tether.__version__`` alike."""
    import tomllib
    from importlib.metadata import version
    from pathlib import Path

    import tether as package

    declared = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert version("tether") == declared["project"]["version"] == package.__version__
    # The real script: the installed entry point and its interpreter.
    assert tether("--version", real=True).stdout == f"tether {package.__version__}\n"
