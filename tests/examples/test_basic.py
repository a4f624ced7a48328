"""``examples.basic``'s runbook against its keyless model: 202 and polling, ``?wait=true``, the
SSE stream with tool progress, the observer's and the interceptor's lines on stdout, and a
``kill -9`` in the middle of the tool, after which the restarted server finishes the run
without asking the model again or re-reading a station it had read."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from .runbook import WAIT, start_example, until

ARGS = ("--station-seconds", "0.5")
ANSWER = r"The weather in {city}: \d+ C, \d+ C, \d+ C\."


def _settled(client: httpx.Client, location: str) -> dict[str, Any]:
    """Poll the submission until it settles, as the runbook's ``curl`` does."""
    view: dict[str, Any] = {}

    def done() -> bool:
        nonlocal view
        view = client.get(location).json()
        return bool(view["status"] == "settled")

    until(done, f"{location} to settle")
    return view


def _follow(client: httpx.Client, body: str) -> list[tuple[str, Any]]:
    """``curl -N .../agents/assistant/me?follow=true`` while a message is sent: the events,
    up to the message's settlement."""
    events: list[tuple[str, Any]] = []
    with client.stream("GET", "/agents/assistant/me?follow=true") as stream:
        sent = client.post("/agents/assistant/me", json={"body": body})
        assert sent.status_code == 202
        mine = sent.json()["submissionId"]
        event = ""
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                events.append((event, data))
                if event == "submission_settled" and data["submissionId"] == mine:
                    return events
    raise AssertionError(f"the stream ended before the settlement: {events}")


def test_the_basic_runbook(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'data'}"
    server = start_example("basic", store, tmp_path / "basic.log", *ARGS)
    with httpx.Client(base_url=server.url, timeout=WAIT) as client:
        # 1. 202 at once, with the submission's Location; polled until it settles.
        accepted = client.post(
            "/agents/assistant/me", json={"body": "what is the weather in Paris?"}
        )
        assert accepted.status_code == 202
        location = accepted.headers["location"]
        assert location == f"/submissions/{accepted.json()['submissionId']}"
        settlement = _settled(client, location)["settlement"]
        assert settlement["status"] == "succeeded"
        assert re.fullmatch(ANSWER.format(city="Paris"), settlement["result"])

        # 2. ?wait=true answers with the settlement.
        waited = client.post(
            "/agents/assistant/me?wait=true", json={"body": "what is the weather in Oslo?"}
        )
        assert waited.status_code == 200
        assert waited.json()["status"] == "succeeded"
        assert re.fullmatch(ANSWER.format(city="Oslo"), waited.json()["result"])

        # 3. The live stream: records, and the tool's progress between them.
        events = _follow(client, "what is the weather in Rome?")
        kinds = [kind for kind, _ in events]  # the session's records from the start, then
        kinds = kinds[len(kinds) - kinds[::-1].index("user_message") :]  # the Rome run's
        progress = [data["text"] for kind, data in events if kind == "progress"]
        assert len(progress) == 3
        for station, text in enumerate(progress, 1):
            assert re.fullmatch(rf"station {station} of 3 in Rome: \d+ C", text)
        assert kinds.index("tool_called") < kinds.index("progress") < kinds.index("tool_outcome")

        # The same session as stream events, read to its end (it is at rest).
        stream = client.get("/agents/assistant/me", params={"view": "stream"}).text
        contents = re.findall(r'"content":\{"type":"(\w+)"', stream)
        # Rome's, and how its submission ended.
        assert contents[-5:] == ["text", "tool_request", "tool_response", "text", "data"]

    # What the observer and the interceptor printed, one line each.
    output = server.output()
    assert "observer: settled assistant/me/default settlement=" in output
    assert "observer: tool_progress assistant/me/default" in output
    assert re.search(r"interceptor: tool weather \(call-\S+\) ok in \d+\.\d\ds", output)
    assert re.search(r"interceptor: turn scripted ok in \d+\.\d\ds", output)

    # 4. kill -9 in the middle of the tool, then the same command again.
    with httpx.Client(base_url=server.url, timeout=WAIT) as client:
        slow = client.post("/agents/assistant/me", json={"body": "what is the weather in Lima?"})
    submission = slow.json()["submissionId"]
    server.wait_for_output("tool: reading station 2 of 3 in Lima")  # station 1 is journaled
    server.kill()
    before = server.output()
    restarted = start_example("basic", store, tmp_path / "restarted.log", *ARGS)
    with httpx.Client(base_url=restarted.url, timeout=WAIT) as client:
        view = _settled(client, f"/submissions/{submission}")
        records = client.get("/agents/assistant/me/records", params={"limit": 1000}).json()
    restarted.stop()
    assert view["settlement"]["status"] == "succeeded"
    assert re.fullmatch(ANSWER.format(city="Lima"), view["settlement"]["result"])
    assert len(view["attempts"]) == 2  # killed, then taken over

    after = restarted.output()
    assert before.count("tool: reading station 1 of 3 in Lima") == 1
    assert "tool: reading station 1 of 3 in Lima" not in after  # served from the log
    assert "tool: reading station 3 of 3 in Lima" in after  # what was left, read live
    assert after.count("interceptor: turn") == 1  # the answer; the tool call was recorded
    assert "observer: recovery assistant/me/default decision='resume'" in after

    mine = Counter(r["kind"] for r in records["records"] if r.get("submissionId") == submission)
    assert mine["model_called"] == 2  # the tool call, the answer: each asked once
    assert mine["tool_called"] == mine["tool_outcome"] == mine["submission_settled"] == 1
    assert mine["step_recorded"] == 3  # one per station, however many processes read them
