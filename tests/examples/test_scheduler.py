"""``examples.scheduler``'s runbook against its keyless model: two processes on one SQLite
store fire a schedule's windows; the one running a window is SIGKILLed mid-run (its model
call recorded) and started again; every window's dispatch id is admitted once, each window
settles once, and the killed run's window is taken over by another worker."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from .runbook import WAIT, Example, start_example, until

EVERY = 1.0
ARGS = ("--every", f"{EVERY:g}", "--think-seconds", "0.3")
SESSION = "/agents/monitor/site"


def _worker(example: Example) -> str:
    """The owner id the example printed at startup (its attempts carry it)."""
    found = re.search(r"\(worker (worker-\S+)\)", example.output())
    assert found, example.output()
    return found.group(1)


def _records(client: httpx.Client) -> list[dict[str, Any]]:
    """The session's records (none before its first window is admitted)."""
    page = client.get(f"{SESSION}/records", params={"limit": 1000})
    if page.status_code == 404:  # no window admitted yet
        return []
    records: list[dict[str, Any]] = page.json()["records"]
    return records


def _windows(client: httpx.Client) -> list[dict[str, Any]]:
    """The session's signal records, one per admitted window."""
    return [r for r in _records(client) if r["kind"] == "signal"]


def _submission(client: httpx.Client, submission_id: str) -> dict[str, Any]:
    view: dict[str, Any] = client.get(f"/submissions/{submission_id}").json()
    return view


def _running(client: httpx.Client) -> tuple[dict[str, Any], dict[str, Any]]:
    """The submission of a window being run, and the attempt running it, once its run has
    called the model: a claim alone is not yet a run (one made at admission may wait for
    the session's previous run in its process to end), so the kill lands in the run."""
    found: tuple[dict[str, Any], dict[str, Any]] | None = None

    def running() -> bool:
        nonlocal found
        windows = _windows(client)
        if not windows:
            return False
        view = _submission(client, windows[-1]["submissionId"])
        if view["status"] != "running":
            return False
        attempt = view["attempts"][-1]  # a running submission's latest attempt holds it
        called = any(
            r["kind"] == "model_called" and r.get("attemptId") == attempt["attemptId"]
            for r in _records(client)
        )
        if called:
            found = (view, attempt)
        return called

    until(running, "a window's run calling its model")
    assert found is not None
    return found


def _settled(client: httpx.Client, submission_id: str) -> bool:
    return bool(_submission(client, submission_id)["status"] == "settled")


def test_two_processes_and_a_kill_fire_each_window_once(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'data'}"
    first = start_example("scheduler", store, tmp_path / "a.log", *ARGS, ready=False)
    second = start_example("scheduler", store, tmp_path / "b.log", *ARGS, ready=False)
    processes = {}
    for example in (first, second):
        example.wait_ready()
        processes[_worker(example)] = example
    with httpx.Client(base_url=first.url, timeout=WAIT) as client:
        [listed] = client.get("/schedules").json()["schedules"]
        assert (listed["agent"], listed["instance"], listed["every"]) == ("monitor", "site", EVERY)
        assert listed["source"] == "config" and listed["nextFireAt"]
        schedule = listed["id"]

        # SIGKILL whichever process is running a window, in the middle of its run.
        victim, cut = _running(client)
        owner = cut["ownerId"]
        killed = processes.pop(owner)
        killed.kill()
        [survivor] = processes.values()

    log = tmp_path / "restarted.log"
    restarted = start_example("scheduler", store, log, *ARGS)  # as the runbook does
    with httpx.Client(base_url=survivor.url, timeout=WAIT) as client:
        until(lambda: _settled(client, victim["submissionId"]), "the killed window to settle")
        count = len(_windows(client))
        until(lambda: len(_windows(client)) >= count + 3, "three more windows")
        sessions = client.get("/sessions", params={"agent": "monitor"}).json()["sessions"]
        windows = _windows(client)
        until(lambda: _settled(client, windows[-1]["submissionId"]), "the last window to settle")
        records = client.get(f"{SESSION}/records", params={"limit": 1000}).json()["records"]
        views = [_submission(client, w["submissionId"]) for w in windows]
    restarted.stop()
    survivor.stop()

    # Each window once: one signal per window start, one submission per dispatch id.
    tags = [w["payload"]["tag"] for w in windows]
    assert Counter(tags).most_common(1)[0][1] == 1, tags
    assert tags == sorted(tags)
    for tag in tags:  # on the grid of the period, from the Unix epoch
        assert datetime.fromisoformat(tag).timestamp() % EVERY == 0
    assert [v["dispatchId"] for v in views] == [f"schedule:{schedule}:{tag}" for tag in tags]
    assert len({v["submissionId"] for v in views}) == len(views)
    for view, tag in zip(views, tags, strict=True):
        assert view["settlement"]["status"] == "succeeded"
        assert (
            view["settlement"]["result"] == f"Checked the site for the window of {tag}: all quiet."
        )
    settled = Counter(r["submissionId"] for r in records if r["kind"] == "submission_settled")
    assert set(settled.values()) == {1}

    # The killed window: its run cut, then taken over by another process, and settled once.
    # Its attempts are its claims: a claim given back unrun (at a shutdown, say) is one too,
    # so the cut run is found by its id, not by its place.
    [taken_over] = [v for v in views if v["submissionId"] == victim["submissionId"]]
    attempts = taken_over["attempts"]
    cut_at = [a["attemptId"] for a in attempts].index(cut["attemptId"])
    assert attempts[cut_at]["ownerId"] == owner
    assert owner not in [a["ownerId"] for a in attempts[cut_at + 1 :]]
    mine = [r for r in records if r.get("submissionId") == victim["submissionId"]]
    [settled_by] = [r.get("attemptId") for r in mine if r["kind"] == "submission_settled"]
    if settled_by != cut["attemptId"]:  # the kill landed before the run settled
        assert attempts[-1]["attemptId"] == settled_by and attempts[-1]["ownerId"] != owner
    assert sessions[0]["records"] >= 1 + 8 * count  # created, then 8 records a window
