"""Every Python example of docs/codex.md, run as written against a fake ``codex`` on
``PATH`` that prints a run captured from the real CLI (issue 42 item 7): the tap reads the
page's ``run.jsonl``, the run example starts the CLI in the page's ``/srv/repo`` (a
temporary directory) with its key, and the ``durable`` app answers a message once, then
replays with no CLI."""

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether.engine import Runtime
from tether.journal import Journal
from tether.store import Store

from ...engine.test_runtime import settle
from ..claude_code.support import CODEX_FIXTURES, fake_cli, logical, on_path, recorded, runs
from ..cuts import harness_of
from ..doc_examples import Page, TapReader, run_example
from .test_durable import tap_of

pytestmark = pytest.mark.timeout(60)

Make = Callable[..., Runtime]
PAGE = Page("codex.md")
TAP = 'open("run.jsonl")'
RUN = "turn = run_codex("
ADAPTER = "# myapp.py"
REPO = '"/srv/repo"'
KEY = "sk-from-the-readers-vault"


def test_every_python_example_of_the_page_is_run_by_a_test() -> None:
    assert PAGE.unclaimed([TAP, RUN, ADAPTER]) == []


def in_repo(phrase: str, repo: Path) -> str:
    """The page's example holding ``phrase``, its ``/srv/repo`` the reader's ``repo``."""
    code = PAGE.example(phrase)
    assert REPO in code
    return code.replace(REPO, repr(str(repo)))


def ran_in(codex: Path) -> Path:
    return Path(recorded(codex, "cwd").strip()).resolve()


async def test_the_tap_example_streams_a_captured_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(CODEX_FIXTURES / "command.jsonl", tmp_path / "run.jsonl")
    monkeypatch.chdir(tmp_path)
    reader = TapReader()
    namespace: dict[str, Any] = reader.names()
    await run_example(PAGE.example(TAP), namespace)
    said, whole = await tap_of("command")
    assert logical(reader.events) == said
    assert reader.signals  # the command's span and the reasoning's
    turn = namespace["turn"]
    assert turn.usage() == whole.usage() and turn.usage().num_tool_calls == 1
    printed = capsys.readouterr().out.splitlines()
    assert printed == [str(whole.usage()), f"{whole.thread_id} None []"]


async def test_the_run_example_starts_the_cli_in_the_repo_with_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir, repo = tmp_path / "bin", tmp_path / "repo"
    repo.mkdir()
    codex = fake_cli(bin_dir, "codex", CODEX_FIXTURES / "command.jsonl", environ=["OPENAI_API_KEY"])
    monkeypatch.setenv("PATH", on_path(bin_dir)["PATH"])  # env= is laid over this one
    namespace: dict[str, Any] = {"key": KEY}
    await run_example(in_repo(RUN, repo), namespace)
    assert runs(codex) == [
        [
            "exec",
            "--json",
            "--model",
            "gpt-5.5",
            "--sandbox",
            "workspace-write",
            "--skip-git-repo-check",
            "-",
        ]
    ]
    assert recorded(codex, "stdin") == "Fix the failing test"
    assert ran_in(codex) == repo.resolve()
    assert recorded(codex, "env") == f"OPENAI_API_KEY={KEY}\n"
    _, whole = await tap_of("command")
    turn = namespace["turn"]
    assert turn.failure is None and turn.usage() == whole.usage()
    assert capsys.readouterr().out == "0 \n"  # the exit status, and a CLI that wrote no stderr


async def test_the_durable_example_answers_and_replays_without_the_cli(
    make_runtime: Make, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, repo = tmp_path / "bin", tmp_path / "repo"
    repo.mkdir()
    codex = fake_cli(bin_dir, "codex", CODEX_FIXTURES / "command.jsonl")
    monkeypatch.setenv("PATH", on_path(bin_dir)["PATH"])
    namespace: dict[str, Any] = {}
    await run_example(in_repo(ADAPTER, repo), namespace, "myapp")
    agents = namespace["agents"]()
    async with make_runtime(agents) as runtime:
        receipt = await runtime.dispatch("coder", "acme", "Why does test_io fail?")
        settled = await settle(runtime, receipt.submission_id)
    assert settled == {"status": "succeeded", "result": "The command printed: hello from codex"}
    assert runs(codex) == [["exec", "--json", "--sandbox", "workspace-write", "-"]]
    assert recorded(codex, "stdin") == "Why does test_io fail?"
    assert ran_in(codex) == repo.resolve()
    kinds = [r.kind for r in await store.read(receipt.conversation_id)]
    assert "assistant_text_delta" in kinds and kinds.count("tool_outcome") == 1

    # Offline: with no CLI left to start, the session replays from its log alone.
    codex.unlink()
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(harness_of(agents["coder"])) == [settled["result"]]
    assert len(runs(codex)) == 1
