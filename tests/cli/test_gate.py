"""``tether replay --against``, the deploy gate, against a SQLite store recorded under v1 (a
finished session and one parked on an approval): a line per session and a summary, exit 0
when the new code is compatible or diverges only where nothing would resume, 1 when a run
that would be resumed diverges (issue 38 item 4)."""

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tether.cli._gate import parse_since
from tether.cli._main import app

from .command import tether
from .gate_app import record

pytestmark = pytest.mark.process

REPO = Path(__file__).parents[2]


def recorded(tmp_path: Path, *, parked: bool = True) -> str:
    url = f"sqlite:///{tmp_path / 'store'}"
    asyncio.run(record(url, parked=parked))
    return url


def gate(url: str, deploy: str, *args: str, code: int) -> list[str]:
    """The gate's lines (its stdout), run as a user runs it, exiting with ``code``."""
    result = tether(
        "replay",
        "--against",
        f"tests.cli.gate_app:{deploy}",
        "--store",
        url,
        *args,
        code=code,
        cwd=REPO,
    )
    return result.stdout.splitlines()


def test_the_same_code_passes_the_gate(tmp_path: Path) -> None:
    url = recorded(tmp_path)
    *sessions, summary = gate(url, "v1", code=0)
    assert sorted(sessions) == [
        "assistant/acme/done (done, v1 -> v1): compatible",
        "assistant/acme/parked (parked, v1 -> v1): compatible",
    ]
    assert summary.startswith("checked 2 sessions: 2 compatible, 0 diverged, 0 need a patch")
    assert summary.endswith("the gate passes")


def test_another_prompt_fails_the_gate_on_the_parked_run(tmp_path: Path) -> None:
    url = recorded(tmp_path)
    *sessions, summary = gate(url, "v2_prompt", code=1)
    lines = {line.split(" ", 1)[0]: line for line in sessions}
    parked, done = lines["assistant/acme/parked"], lines["assistant/acme/done"]
    assert "(parked, v1 -> v2): diverged at seq " in parked
    assert parked.endswith(": system prompt; a run would resume it")
    assert done.endswith(": system prompt; nothing would resume it")
    assert "1 that a run would resume would fail: the gate fails" in summary


def test_a_divergence_nothing_would_resume_is_reported_and_passes(tmp_path: Path) -> None:
    url = recorded(tmp_path, parked=False)
    [done, summary] = gate(url, "v2_prompt", code=0)
    assert "diverged at seq" in done and summary.endswith("the gate passes")


def test_a_harness_that_makes_other_effects_needs_a_patch(tmp_path: Path) -> None:
    url = recorded(tmp_path)
    *sessions, summary = gate(url, "v2_patch", code=1)
    assert all(": needs a patch at seq " in line for line in sessions)
    assert all("the harness ran step audit" in line for line in sessions)
    assert "2 need a patch" in summary


def test_filters_and_an_empty_sample(tmp_path: Path) -> None:
    url = recorded(tmp_path)
    assert gate(url, "v2_prompt", "--agent", "other", code=0) == ["no recorded sessions to check"]
    assert len(gate(url, "v2_prompt", "--since", "1h", "--version", "v1", code=1)) == 3
    assert len(gate(url, "v2_prompt", "--limit", "1", "--agent", "assistant", code=1)) == 2
    assert gate(url, "v1", "--since", "2999-01-01", code=0) == ["no recorded sessions to check"]


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "--against", "tests.cli.gate_app:v1", "done"],
        ["replay", "--against", "tests.cli.gate_app:v1", "--demo"],
        ["replay", "done", "--demo", "--since", "2h"],
        ["replay", "--against", "tests.cli.gate_app:v1", "--since", "last tuesday"],
        ["replay"],
    ],
)
def test_usage_errors(args: list[str]) -> None:
    assert CliRunner().invoke(app, args).exit_code == 2


def test_since_takes_a_time_or_a_span_back() -> None:
    now = datetime(2026, 5, 1, 12, tzinfo=UTC)
    assert parse_since("2h", now) == now - timedelta(hours=2)
    assert parse_since("3d", now) == now - timedelta(days=3)
    assert parse_since("2026-04-30T08:00", now) == datetime(2026, 4, 30, 8, tzinfo=UTC)
    assert parse_since("2026-04-30T08:00+02:00", now) == datetime(2026, 4, 30, 6, tzinfo=UTC)
