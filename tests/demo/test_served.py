"""``tether serve --demo`` (a real server on 127.0.0.1) wires the demo's subagents policy: the
assistant delegates to the researcher, one child per topic, over HTTP."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..cli.conftest import ServerProcess, start_server

pytestmark = pytest.mark.process


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    started = start_server(tmp_path / "data", tmp_path / "serve.log")
    yield started
    started.stop()


def ask(server: ServerProcess, instance: str, text: str) -> tuple[str, list[dict[str, Any]]]:
    """The assistant's answer to ``text`` and the parent's log, as the server returns them."""
    answer = httpx.post(
        f"{server.url}/agents/assistant/{instance}",
        params={"wait": True},
        json={"body": text},
        timeout=90,  # the server holds ?wait for 60 s
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "succeeded", answer.json()
    records = httpx.get(
        f"{server.url}/agents/assistant/{instance}/records", params={"limit": 1000}, timeout=30
    )
    records.raise_for_status()
    return str(answer.json()["result"]), records.json()["records"]


def settled_child(server: ServerProcess, submission_id: str) -> dict[str, Any]:
    child = httpx.get(
        f"{server.url}/submissions/{submission_id}", params={"wait": True}, timeout=90
    )
    child.raise_for_status()
    found: dict[str, Any] = child.json()
    assert found["status"] == "settled", found
    return found


def tasks(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r["payload"] for r in records if r["kind"] == kind]


def test_one_task(server: ServerProcess) -> None:
    answer, records = ask(server, "one", "ask the researcher about tides")
    assert answer.startswith("The researcher says, on tides: ")
    assert "three findings about tides" in answer
    [spawned] = tasks(records, "task_spawned")
    [finished] = tasks(records, "task_finished")
    assert spawned["agent"] == "researcher" and spawned["instance"] == "one"
    assert finished["childSubmissionId"] == spawned["childSubmissionId"]
    child = settled_child(server, spawned["childSubmissionId"])
    assert "three findings about tides" in str(child["settlement"]["result"])


def test_two_tasks_fan_out(server: ServerProcess) -> None:
    answer, records = ask(server, "two", "ask the researcher about tides and about the moon")
    assert "three findings about tides" in answer
    assert "three findings about the moon" in answer
    spawned = tasks(records, "task_spawned")
    finished = tasks(records, "task_finished")
    assert len(spawned) == 2
    children = {task["childSubmissionId"] for task in spawned}
    assert len(children) == 2
    assert {task["childSubmissionId"] for task in finished} == children
    results = sorted(
        str(settled_child(server, child)["settlement"]["result"]) for child in children
    )
    assert "three findings about the moon" in results[0]
    assert "three findings about tides" in results[1]
