"""Every example serves on a port of its own (never the demo's 8484), binds it before it says
anything, and stops at once, in one line and without a banner, when the port is taken."""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ..processes import free_port
from .runbook import ROOT

pytestmark = pytest.mark.process

EXAMPLES = ("basic", "chat", "triage", "github_bot", "scheduler", "multitenant", "coder")
DEMO_PORT = 8484
"""``tether serve --demo``'s, which the README's first command starts."""


def test_each_example_has_a_port_of_its_own() -> None:
    ports = [importlib.import_module(f"examples.{name}").PORT for name in EXAMPLES]
    assert DEMO_PORT not in ports, dict(zip(EXAMPLES, ports, strict=True))
    assert len(set(ports)) == len(ports), dict(zip(EXAMPLES, ports, strict=True))


def test_every_example_serves_through_the_helper_that_binds_first() -> None:
    """A started process per example costs seconds on a loaded machine: the two below run,
    and the rest are held to the same helper (none starts uvicorn itself)."""
    for name in EXAMPLES:
        source = (ROOT / "examples" / name / "__init__.py").read_text()
        assert "from examples._serving import serve" in source, name
        assert "uvicorn" not in source, name


@pytest.mark.parametrize("name", ["basic", "chat"])
def test_a_taken_port_stops_the_example_before_it_says_it_serves(name: str, tmp_path: Path) -> None:
    port, store = free_port(), f"sqlite:///{tmp_path}/data"
    command = [sys.executable, "-m", f"examples.{name}", "--port", str(port), "--store", store]
    env = {key: value for key, value in os.environ.items() if key != "TETHER_MODEL"}
    env["GITHUB_WEBHOOK_SECRET"] = "change-me"  # the bot's one required setting
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    assert done.returncode == 8, done
    assert done.stdout == "", done.stdout  # no banner, no console URL
    assert done.stderr.splitlines()[-1] == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(another server holds it: stop it or give --port)"
    ), done.stderr
