"""The README's two set-up commands: one serves, one tests, and they can run side by side."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", readme, re.DOTALL)
    assert block is not None
    return block.group(1).strip().splitlines()


def _venv(command: str) -> str:
    found = re.match(r"python3 -m venv (\S+) && ", command)
    assert found is not None, command
    return found.group(1)


def test_the_readme_opens_with_a_serve_command_and_a_test_command() -> None:
    serve, test = _setup_commands()
    assert serve.endswith("tether serve --demo")
    # Three workers: the suite mostly waits (processes, fsyncs, sockets), so even two cores
    # run three test processes at once to good effect (pytest-xdist).
    assert test.endswith("/bin/pytest -n 3")
    # The test command installs into a virtualenv of its own: running it beside a server
    # started by the first command does not reinstall anything under that server.
    assert _venv(serve) != _venv(test)
    assert f" {_venv(serve)}/" not in test


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, test = _setup_commands()
    assert test in (ROOT / ".ci" / "run").read_text().splitlines()
