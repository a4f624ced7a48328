"""The shell snippets of the README, the quickstart and the how-tos run as written.

One real ``tether serve --demo`` (a free port, a fresh store in a scratch directory that is
also the snippets' working directory) serves every page, in the order a reader meets them.
Each command of a ```sh block must exit 0, or with the code its comment names (``(exit code
9)``); each ``$ command`` of a ```console block must print what the page shows under it. What
a reader substitutes is substituted: the port, ``.venv/bin/`` (this test's own virtualenv),
``<approval-id>`` (the oldest pending approval) and ``<conversation-id>`` (the session a
block's commands last talked to, as ``tether sessions`` lists it first). A ```python block
whose first line names a file (``# myapp.py``) is written there for the commands that run it.

A plain ``tether ...`` command (no shell syntax around it) runs in this process, through the
console script's own ``app`` with the same arguments, environment and working directory: some
thirty interpreter starts would take half a minute of CPU. Anything else runs under ``bash``.

A block that cannot run here (it installs, needs a key or PostgreSQL, or serves until Ctrl-C)
says so just before it, ``<!-- not-run: why -->``, and shows up here as a skip with that
reason. curl is given ``--fail-with-body`` (through its config file), so an HTTP error fails
the command as a reader would see it fail.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import app

from .processes import free_port, log_text, reap, start, wait_ready_blocking

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parent.parent
PAGES = (
    "README.md",
    "docs/index.md",
    "docs/quickstart.md",
    "docs/console.md",
    "docs/models.md",
    "docs/versions.md",
    "docs/client.md",
    *sorted(str(page.relative_to(ROOT)) for page in (ROOT / "docs" / "how-to").glob("*.md")),
)
"""The pages whose snippets talk to the demo server, in reading order."""
BIN = Path(sys.executable).parent
DEMO_PORT = 8484
COMMAND_SECONDS = 60.0
"""How long one command may take (generous: a loaded machine; only a hang reaches it)."""

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>\w*)\s*$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<why>.*?)\s*-->\s*$")
_EXIT_CODE = re.compile(r"\(exit code (\d+)")
_ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
_SOURCE_FILE = re.compile(r"^# (?P<path>[\w/.-]+\.py)$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    text: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Command:
    text: str
    code: int = 0
    output: tuple[str, ...] | None = None
    """What a ```console block shows it print; None where the page shows nothing."""


def blocks(page: str) -> Iterator[Block]:
    """The fenced blocks of ``page``, each with the reason it is not run, if it says one."""
    lines = (ROOT / page).read_text().splitlines()
    number = 0
    while number < len(lines):
        opening = _FENCE.match(lines[number])
        if opening is None:
            number += 1
            continue
        indent, body = len(opening["indent"]), []
        start_line, number = number + 1, number + 1
        while not _closes(lines[number]):
            body.append(lines[number][indent:])
            number += 1
        before = [line for line in lines[: start_line - 1] if line.strip()]
        marker = _NOT_RUN.match(before[-1]) if before else None
        text = "\n".join(body)
        yield Block(page, start_line, opening["language"], text, marker and marker["why"])
        number += 1


def _closes(line: str) -> bool:
    fence = _FENCE.match(line)
    return fence is not None and not fence["language"]


def commands(block: Block) -> list[Command]:
    """A ```sh block's commands (continuations joined, comments kept apart), or a ```console
    block's ``$`` commands with the lines shown under each."""
    found: list[Command] = []
    lines = block.text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        console = block.language == "console"
        if console and not line.startswith("$ "):
            continue
        if not console and (not line.strip() or line.lstrip().startswith("#")):
            continue
        text = line.removeprefix("$ ")
        while text.endswith("\\") and index < len(lines):
            text += "\n" + lines[index]  # bash joins the lines again
            index += 1
        after = []
        while index < len(lines) and not _starts_command(lines[index], console):
            after.append(lines[index])
            index += 1
        if console:
            shown = tuple(line for line in after if line.strip())
            found.append(Command(text, output=shown))
        else:
            comments = " ".join([text.partition(" #")[2], *after])
            code = _EXIT_CODE.search(comments)
            found.append(Command(text, code=int(code.group(1)) if code else 0))
    return found


def _starts_command(line: str, console: bool) -> bool:
    if console:
        return line.startswith("$ ")
    return bool(line.strip()) and not line.lstrip().startswith("#")


def _every_block() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def _shell_blocks() -> list[Block]:
    return [block for block in _every_block() if block.language in ("sh", "console", "bash")]


@pytest.mark.parametrize(
    "block",
    [block for block in _shell_blocks() if block.not_run is not None],
    ids=lambda block: block.name,
)
def test_a_snippet_that_is_not_run_says_why(block: Block) -> None:
    pytest.skip(f"not-run: {block.not_run}")


@dataclass
class Reader:
    """Runs commands as a reader of the pages would, against ``url``."""

    url: str
    cwd: Path
    env: dict[str, str]
    conversation: str | None = None

    def run(self, command: Command) -> str:
        text = self._substituted(command.text)
        words = _plain_tether(text)
        if words is None:
            code, stdout, stderr = self._bash(text)
        else:
            args, into = (words[:-2], words[-1]) if words[-2:-1] == [">"] else (words, None)
            code, stdout, stderr = self._tether(args)
            if into is not None:  # what bash would have written
                (self.cwd / into).write_text(stdout)
                stdout = ""
        shown = f"$ {text}\n(exit {code})\n{stdout}{stderr}"
        assert code == command.code, shown
        if command.output is not None:
            printed = [_shape(line) for line in stdout.splitlines() if line.strip()]
            assert printed == [_shape(line) for line in command.output], shown
        return stdout

    def _bash(self, text: str) -> tuple[int, str, str]:
        done = subprocess.run(
            ["bash", "-c", text],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            check=False,
        )
        return done.returncode, done.stdout, done.stderr

    def _tether(self, args: list[str]) -> tuple[int, str, str]:
        environment: dict[str, str | None] = {"TETHER_URL": self.url, "TETHER_MODEL": None}
        with contextlib.chdir(self.cwd):
            result = CliRunner().invoke(app, args, env=environment)
        crashed = (
            "" if result.exception is None or result.exit_code != 1 else repr(result.exception)
        )
        return result.exit_code, result.stdout, result.stderr + crashed

    def _substituted(self, text: str) -> str:
        text = text.replace(".venv/bin/", f"{BIN}/")
        text = re.sub(rf"\b(localhost|127\.0\.0\.1):{DEMO_PORT}\b", self.url[7:], text)
        if "<approval-id>" in text:
            pending = httpx.get(f"{self.url}/approvals", timeout=30).json()["approvals"]
            assert pending, f"no approval is pending for {text!r}"
            text = text.replace("<approval-id>", pending[0]["approvalId"])
        if "<conversation-id>" in text:
            if self.conversation is None:  # the session the block talked to last
                listed = httpx.get(f"{self.url}/sessions", params={"limit": 1}, timeout=30)
                self.conversation = listed.json()["sessions"][0]["conversationId"]
            text = text.replace("<conversation-id>", self.conversation)
        return text


def _plain_tether(text: str) -> list[str] | None:
    """The arguments of a command that is ``tether`` alone (no pipe, list or variable; its
    output may go to a file, ``> path``, which then ends them), else None."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.commenters = "#"
    words = list(lexer)
    if not words or words[0] not in ("tether", f"{BIN}/tether"):
        return None
    operators = [word for word in words if set(word) <= set("|&;<>()")]
    if operators not in ([], [">"]) or (operators and words[-2] != ">"):
        return None
    return words[1:] if not any("$" in word for word in words) else None


def _shape(line: str) -> str:
    """A line with its ids as ``<id>``: they differ from run to run."""
    return _ULID.sub("<id>", line.rstrip())


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    port, log = free_port(), tmp_path / "serve.log"
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / ".curlrc").write_text("fail-with-body\nshow-error\n")
    env = {key: value for key, value in os.environ.items() if key != "TETHER_MODEL"}
    env |= {
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        "TETHER_URL": f"http://127.0.0.1:{port}",
        "TETHER_DEMO_RESEARCH_SECONDS": "0.3",
        "CURL_HOME": str(tmp_path),
    }
    with log.open("ab") as out:
        server = start(
            [str(BIN / "tether"), "serve", "--demo", "--port", str(port)],
            cwd=work,  # its store is ./tether-data there, which `verify`, `replay` and `fork` read
            env=env,
            stdout=out,
            stderr=out,
        )
    url = f"http://127.0.0.1:{port}"
    wait_ready_blocking(url, server, log)
    try:
        yield Reader(url, work, env)
    finally:
        reap(server)
        print(log_text(log))  # shown with a failure


@pytest.mark.timeout(300)  # a few servers' worth of work: generous for a loaded machine
def test_the_snippets_run_as_written(reader: Reader) -> None:
    outputs: dict[str, str] = {}
    for page in PAGES:
        page_blocks = list(blocks(page))
        for block in page_blocks:
            found = _SOURCE_FILE.match(block.text.partition("\n")[0])
            if block.language == "python" and found is not None:
                path = reader.cwd / found["path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(block.text)
        for block in page_blocks:
            if block.language not in ("sh", "console", "bash") or block.not_run is not None:
                continue
            reader.conversation = None
            for command in commands(block):
                outputs[f"{block.name} {command.text}"] = reader.run(command)
    ran = " .venv/bin/python myapp.py"
    [quickstart] = [printed for name, printed in outputs.items() if name.endswith(ran)]
    _check_the_quickstarts_records(quickstart)


def _check_the_quickstarts_records(printed: str) -> None:
    """``myapp.py`` prints what the quickstart says it does: its records, seq by seq, as the
    table lists them, and the count ``verify`` checked."""
    page = (ROOT / "docs" / "quickstart.md").read_text()
    claimed = re.search(r"# (\d+): records whose chain checked out", page)
    assert claimed is not None
    count = int(claimed.group(1))
    records = dict(re.findall(r"^(\d+) ([a-z_]+)$", printed, re.MULTILINE))
    assert list(records) == [str(seq) for seq in range(1, len(records) + 1)], printed
    assert len(records) == count, f"the page says {count}; it printed:\n{printed}"
    assert f"\n{count}\n" in printed, printed  # what runtime.verify returned
    rows = re.findall(r"^\| (\d+)(?:\u2013(\d+))? \| (.+?) \|", page, re.MULTILINE)
    assert rows and int(rows[-1][1] or rows[-1][0]) == count, rows
    for first, last, kinds in rows:
        span = [records[str(seq)] for seq in range(int(first), int(last or first) + 1)]
        named = re.findall(r"`([a-z_]+)`", kinds)
        if kinds.startswith("…"):  # some of the span's kinds, in order
            assert [kind for kind in span if kind in named] == named, (first, span)
        else:
            assert span == named, (first, span, named)


CURL_POST = re.compile(r"curl\b[^\n]*?\s(-d|--data\S*)\s")


def test_every_curl_that_sends_a_body_says_it_is_json() -> None:
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    pages += (ROOT / "examples").rglob("*.md")
    missing = []
    for page in pages:
        text = re.sub(r"\\\n", " ", page.read_text())
        for line in text.splitlines():
            if CURL_POST.search(line) and "content-type: application/json" not in line.lower():
                missing.append(f"{page.relative_to(ROOT)}: {line.strip()}")
    assert not missing, "\n".join(missing)
