"""Every way a first run goes wrong ends in one line on stderr and an exit code of its own,
and ``serve`` announces itself only once it can answer."""

import re
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from ..postgres import fresh_schema, store_url
from ..processes import free_port, reap, start
from .command import TETHER, read_line, tether
from .conftest import cli_env

pytestmark = pytest.mark.process


def test_a_server_that_is_down(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (["send", "assistant", "me", "hi"], ["approvals"], ["tail", "assistant", "me"]):
        failed = tether(*args, "--url", url, code=3)
        assert f"cannot reach the server at {url}" in failed.error
        assert failed.stdout == ""


def test_a_bad_store_url(tmp_path: Path) -> None:
    failed = tether("serve", "--demo", "--port", "0", "--store", "bogus://x", code=4)
    assert "unsupported store URL 'bogus://x'" in failed.error
    assert tether("verify", "c-1", "--store", "sqlite:/relative", code=4).error


def test_an_app_that_cannot_be_loaded(tmp_path: Path) -> None:
    failed = tether("serve", "--app", "no_such_module:agents", "--port", "0", code=7)
    assert failed.error == "error: --app no_such_module:agents: no module named 'no_such_module'"
    (tmp_path / "broken_app.py").write_text("def agents():\n    raise RuntimeError('boom')\n")
    failed = tether("serve", "--app", "broken_app:agents", "--port", "0", cwd=tmp_path, code=7)
    assert "agents() failed: RuntimeError: boom" in failed.error
    failed = tether("worker", "--app", "broken_app:nothing", cwd=tmp_path, code=7)
    assert "module broken_app has no 'nothing'" in failed.error
    (tmp_path / "harness_app.py").write_text("def agents():\n    return {'h': object()}\n")
    failed = tether("worker", "--app", "harness_app:agents", cwd=tmp_path, code=7)
    assert "agents['h'] must be an AgentDefinition, got object" in failed.error
    (tmp_path / "versions_app.py").write_text("def agents():\n    return {'h': {'v1': object()}}\n")
    failed = tether("worker", "--app", "versions_app:agents", cwd=tmp_path, code=7)
    assert "agents['h']['v1'] must be an AgentDefinition, got object" in failed.error


def test_a_busy_port(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        store = f"sqlite:///{tmp_path / 'data'}"
        failed = tether("serve", "--demo", "--port", str(port), "--store", store, code=8)
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in failed.error
    assert not (tmp_path / "data").exists()  # refused before the store was opened
    failed = tether(
        "serve", "--demo", "--host", "no-such-host.invalid", "--allow-unauthenticated", code=8
    )
    assert failed.error.startswith("error: cannot listen on no-such-host.invalid:8484: ")
    assert "errno" not in failed.error.lower() and "while attempting" not in failed.error


def test_an_unreachable_postgresql_and_its_password(tmp_path: Path) -> None:
    url = f"postgresql://tether:s3cret@127.0.0.1:{free_port()}/tether"
    for args in (["serve", "--demo", "--port", "0"], ["worker", "--demo"], ["records", "c-1"]):
        failed = tether(*args, "--store", url, code=5)
        assert "cannot open the store postgresql://tether:***@127.0.0.1" in failed.error
        assert "s3cret" not in failed.stderr + failed.stdout


def test_serve_announces_itself_once_it_answers(tmp_path: Path) -> None:
    process = start(
        [TETHER, "serve", "--demo", "--port", "0", "--store", f"sqlite:///{tmp_path / 'd'}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(),
    )
    try:
        banner = read_line(process)
        serving = "tether serving assistant, researcher on http://127.0.0.1:"
        assert banner.startswith(serving), banner
        url = banner.split(" on ")[1].split()[0]
        # No retry: once the banner is out, the store is open and the port answers.
        assert httpx.get(f"{url}/readyz", timeout=30).json()["ready"] is True
        assert "(store sqlite:///" in banner
    finally:
        reap(process)
    assert process.returncode == 0  # SIGTERM stops it gracefully


@pytest.mark.postgres
def test_the_banner_hides_the_store_password(tmp_path: Path) -> None:
    # PostgreSQL trusts the local user here, so the password is checked by no one: only shown.
    url, added = re.subn(r"^(postgres(?:ql)?://[^:@/]+)@", r"\1:s3cret@", store_url(fresh_schema()))
    if not added:
        pytest.skip("TETHER_TEST_POSTGRES_URL has no user, or a password of its own")
    assert "s3cret" in url
    process = start(
        [TETHER, "serve", "--demo", "--port", "0", "--store", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(),
    )
    try:
        banner = read_line(process)
    finally:
        reap(process)
    assert "postgresql://postgres:***@" in banner, banner
    assert "s3cret" not in banner
