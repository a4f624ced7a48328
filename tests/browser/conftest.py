"""The web console in a real browser (issue 23, item 8): Debian's Chromium, driven by
Playwright for Python (``executable_path``: Playwright downloads no browser of its own),
against ``tether serve`` run as a child process on 127.0.0.1, as a user would run it.

Without Chromium (``apt-get install chromium``) or Playwright (the ``dev`` extra) every test
here is skipped, with the reason. Screenshots of each panel are saved under
``test-artifacts/console/`` (or ``$TETHER_TEST_ARTIFACTS``), which git ignores.
"""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..processes import free_port, kill, reap, start, wait_ready_blocking

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TETHER_TEST_CHROMIUM", "/usr/bin/chromium")
TETHER = [sys.executable, "-c", "from tether.cli import main; main()"]
WAIT_MS = 30_000
"""How long a step may wait for the page (a loaded machine is slow; a pass is not)."""


def _missing() -> str | None:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        return f"no Chromium at {CHROMIUM}: apt-get install -y chromium"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed: pip install -e '.[dev]'"
    return None


def artifacts() -> Path:
    folder = Path(os.environ.get("TETHER_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "console"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="package")
def browser() -> Iterator["Browser"]:
    """One Chromium for this folder's tests. Playwright's sync API runs an event loop of its
    own on this thread while it is open: it is closed before the async tests of other
    folders run."""
    missing = _missing()
    if missing:
        pytest.skip(missing)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: "Browser") -> Iterator["Page"]:
    """A fresh tab (its own storage), desktop-sized; the page's errors fail the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, errors


@dataclass
class ConsoleServer:
    """``tether serve --demo`` (and the ``slow`` agent) on a port and a SQLite directory that
    outlive its process: :meth:`start` after :meth:`kill` starts it again on both."""

    data: Path
    log: Path
    port: int = field(default_factory=free_port)
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    """The address it binds (``--host``): a loopback one, as nothing here leaves the machine."""
    process: "subprocess.Popen[Any] | None" = None
    shared: bool = False
    """Started by a module's fixture for its tests: the teardown of each test leaves it
    running (the fixture stops it)."""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def ui(self, **query: str) -> str:
        from urllib.parse import urlencode

        return f"{self.url}/ui?{urlencode(query)}" if query else f"{self.url}/ui"

    def start(self) -> None:
        command = [
            *TETHER,
            "serve",
            "--demo",
            "--app",
            "tests.browser.agents:agents",
            "--store",
            f"sqlite:///{self.data}",
            "--host",
            self.host,
            "--port",
            str(self.port),
            *self.args,
        ]
        env = {**os.environ, "TETHER_DEMO_RESEARCH_SECONDS": "2.5", **self.env}
        with self.log.open("ab") as out:
            self.process = start(
                command, outlives_test=self.shared, cwd=ROOT, stdout=out, stderr=out, env=env
            )
        wait_ready_blocking(self.url, self.process, self.log)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        assert self.process is not None
        kill(self.process)

    def stop(self) -> None:
        if self.process is not None:
            reap(self.process)


@pytest.fixture
def make_console(tmp_path: Path) -> Iterator[Callable[..., ConsoleServer]]:
    """Start a server for the test (``args`` for ``tether serve``, ``host`` to bind, ``env``
    for it); stopped after the test. Ask for it before ``page``: the tab then closes first,
    and the server, whose graceful stop waits for open streams to end, stops at once."""
    started: list[ConsoleServer] = []

    def make(*args: str, host: str = "127.0.0.1", **env: str) -> ConsoleServer:
        server = ConsoleServer(
            tmp_path / "data", tmp_path / "serve.log", args=args, env=env, host=host
        )
        server.start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def console(make_console: Callable[..., ConsoleServer]) -> ConsoleServer:
    """``tether serve --demo`` and the ``slow`` agent, without auth."""
    return make_console()


def ready(page: "Page", url: str) -> None:
    """Open the console at ``url`` and wait until it has shown its session."""
    page.goto(url)
    page.wait_for_selector("body[data-ready]", state="attached")


def screenshot(page: "Page", name: str) -> Path:
    """Save what the page shows as ``<artifacts>/<name>.png``."""
    path = artifacts() / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


# Signed-in consoles (issue 39): `tether serve --auth tokens` and tokens issued before it starts.

READER = ("--subject", "rita", "--tenant", "acme", "--scope", "sessions:read")
WRITER = (
    "--subject",
    "ann",
    "--display",
    "Ann Writer",
    "--tenant",
    "acme",
    *("--scope", "sessions:read", "--scope", "sessions:write"),
    *("--scope", "approvals:read", "--scope", "approvals:decide"),
)


def tokens(store: str, *args: str) -> "subprocess.Popen[str]":
    """``tether tokens ...`` on the store, as an operator runs it."""
    return subprocess.Popen(
        [*TETHER, "tokens", *args, "--store", store],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def output(running: "subprocess.Popen[str]") -> str:
    """What a ``tether tokens`` command printed, once it succeeded."""
    out, err = running.communicate(timeout=60)
    assert running.returncode == 0, err
    return out


@dataclass(frozen=True)
class Issued:
    token: str
    id: str


@dataclass(frozen=True)
class Served:
    console: ConsoleServer
    store: str
    reader: Issued
    writer: Issued
    revoked: Issued


def issued(running: "subprocess.Popen[str]") -> Issued:
    answer = json.loads(output(running))
    return Issued(answer["token"], answer["id"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for this module's tests, its tokens issued before it starts."""
    folder = tmp_path_factory.mktemp("scopes")
    store = f"sqlite:///{folder / 'data'}"
    reader = issued(tokens(store, "create", *READER, "--json"))  # creates the store
    # The others while the server starts: a CLI process starts no faster than the server.
    writing = tokens(store, "create", *WRITER, "--json")
    leaving = tokens(store, "create", "--subject", "leaver", "--scope", "sessions:read", "--json")
    console = ConsoleServer(
        folder / "data", folder / "serve.log", args=("--auth", "tokens"), shared=True
    )
    try:
        console.start()
        writer, revoked = issued(writing), issued(leaving)
        yield Served(console, store, reader, writer, revoked)
    finally:
        console.stop()


def sign_in(page: "Page", url: str, token: str) -> None:
    """Open the console at ``url`` and sign in with ``token``."""
    from playwright.sync_api import expect

    page.goto(url)
    dialog = page.get_by_role("dialog", name="Sign in")
    expect(dialog).to_contain_text("your API token")
    dialog.get_by_label("Token").fill(token)
    dialog.get_by_role("button", name="Sign in").click()
    expect(dialog).to_be_hidden()
    page.wait_for_selector("body[data-ready]", state="attached")
