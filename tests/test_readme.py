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
    """CI runs the command split at its last ``&&``, each part verbatim on a line of its own:
    the install first (the quick checks run on it), the tests last; it installs once."""
    _, test = _setup_commands()
    install, tests = test.rsplit(" && ", 1)
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install in lines
    assert tests in lines
    assert lines.index(install) < lines.index(tests)
    assert sum(".venv-test/bin/pip install" in line for line in lines) == 1
