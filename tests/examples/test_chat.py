"""``examples.chat``'s runbook against its keyless model: the printed console URL and the page
it serves, a message whose answer streams, a steer sent mid-answer taken by the running
submission (its ``steer_received`` record in that submission's execution), a ``kill -9``
mid-answer after which the restarted server finishes the answer, and ``--auth-token`` (on
that restart) guarding the API but not the page. With Chromium and Playwright, a message
and a steer in the page the printed URL opens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from .runbook import WAIT, Example, start_example, until

QUESTION = "what should I cook tonight?"
STEER = "make it vegetarian"
TOKEN = "s3cret"
CHROMIUM = Path("/usr/bin/chromium")
MS = WAIT * 1000
FAST = ("--think-seconds", "2", "--chunk-delay", "0.02")
"""Quicker than the runbook's defaults (3 s, 0.05 s), still seconds of run to steer into."""


def _url(server: Example) -> str:
    """The console URL the example printed once it listened."""
    port = server.url.rsplit(":", 1)[1]
    line = f"console: http://127.0.0.1:{port}/ui?agent=chat&instance=me&session=default"
    server.wait_for_output(line)
    return next(row for row in server.output().splitlines() if row.startswith(line))[9:]


def _records(client: httpx.Client) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = client.get(
        "/agents/chat/me/records", params={"limit": 1000}
    ).json()["records"]
    return records


def _until_recorded(client: httpx.Client, submission: str, kind: str, *, after: str = "") -> None:
    """Until the submission's log holds a ``kind`` record (after its first ``after`` one)."""

    def seen() -> bool:
        kinds = [r["kind"] for r in _records(client) if r.get("submissionId") == submission]
        if after:
            kinds = kinds[kinds.index(after) + 1 :] if after in kinds else []
        return kind in kinds

    until(seen, f"a {kind} record of {submission}")


def _settled(client: httpx.Client, submission: str) -> dict[str, Any]:
    view: dict[str, Any] = {}

    def done() -> bool:
        nonlocal view
        view = client.get(f"/submissions/{submission}", params={"wait": True}).json()
        return bool(view["status"] == "settled")

    until(done, f"{submission} to settle")
    return view


def test_the_chat_runbook(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'data'}"
    server = start_example("chat", store, tmp_path / "chat.log", *FAST)
    url = _url(server)
    assert url.endswith("&panel=chat")
    with httpx.Client(base_url=server.url, timeout=WAIT) as client:
        page = client.get(url.removeprefix(server.url))
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "<title>" in page.text

        # 1-2. A message; a steer while its answer streams, taken by the running submission.
        sent = client.post("/agents/chat/me", json={"body": QUESTION})
        assert sent.status_code == 202
        host = sent.json()["submissionId"]
        _until_recorded(client, host, "assistant_text_delta")  # "Let me think about ..."
        steered = client.post("/agents/chat/me/steer", json={"body": STEER})
        assert steered.status_code == 200
        settlement = _settled(client, host)["settlement"]
        assert settlement["status"] == "succeeded"
        assert settlement["result"].startswith("Here is what I came up with: three thoughts on")
        assert f"You also told me: {STEER}." in settlement["result"]
        steer = _settled(client, steered.json()["submissionId"])["settlement"]
        assert steer == {"status": "succeeded", "result": {"deliveredTo": host}}

        mine = [r for r in _records(client) if r.get("submissionId") == host]
        kinds = [r["kind"] for r in mine]
        (execution,) = {r["executionId"] for r in mine if r["kind"] == "execution_started"}
        (received,) = [r for r in mine if r["kind"] == "steer_received"]
        assert received["executionId"] == execution  # the same execution, not a new one
        # Taken at the safe point after the think tool, before the answer's model call.
        answer_call = max(i for i, kind in enumerate(kinds) if kind == "model_called")
        assert kinds.index("tool_outcome") < kinds.index("steer_received") < answer_call
        assert kinds.count("assistant_text_delta") > 2  # the answers stream, chunk by chunk
        # A steer when nothing runs is refused.
        assert client.post("/agents/chat/me/steer", json={"body": "late"}).status_code == 409

        # 3. kill -9 while the answer streams; restarted (with a token, 4.), it finishes it.
        sent = client.post("/agents/chat/me", json={"body": "and for dessert?"})
        cut = sent.json()["submissionId"]
        _until_recorded(client, cut, "assistant_text_delta", after="tool_outcome")
    server.kill()
    restarted = start_example(
        "chat", store, tmp_path / "restarted.log", *FAST, "--auth-token", TOKEN
    )
    assert TOKEN not in restarted.output()
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=restarted.url, headers=bearer, timeout=WAIT) as client:
        view = _settled(client, cut)
        assert view["settlement"]["status"] == "succeeded"
        assert view["settlement"]["result"].startswith("Here is what I came up with:")
        assert len(view["attempts"]) == 2
        settled = [r for r in _records(client) if r["kind"] == "submission_settled"]
        assert [r["submissionId"] for r in settled].count(cut) == 1

    # 4. --auth-token: the API wants it; the page (which asks for it) does not.
    assert httpx.get(_url(restarted), timeout=WAIT).status_code == 200
    assert httpx.get(f"{restarted.url}/sessions", timeout=WAIT).status_code == 401
    signed = httpx.get(f"{restarted.url}/sessions", headers=bearer, timeout=WAIT)
    assert signed.status_code == 200
    restarted.stop()


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}")
def test_the_printed_url_in_a_browser(tmp_path: Path) -> None:
    """The printed URL opens the chat; a message streams its answer, and Steer joins it."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    expect = sync_api.expect
    store = f"sqlite:///{tmp_path / 'data'}"
    server = start_example("chat", store, tmp_path / "chat.log", *FAST, ready=False)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))  # meanwhile
        try:
            page = browser.new_page()
            page.set_default_timeout(MS)
            page.goto(_url(server))
            page.wait_for_selector("body[data-ready]", state="attached")
            message = page.get_by_role("textbox", name="Message")
            message.fill(QUESTION)
            message.press("Enter")
            steer = page.get_by_role("button", name="Steer")
            expect(steer).to_be_enabled(timeout=MS)  # the run is in flight: it thinks
            message.fill(STEER)
            steer.click()
            transcript = page.get_by_role("log", name="Transcript")
            result = transcript.locator(".tool .tool-result")
            expect(result).to_contain_text(f"three thoughts on {QUESTION!r}", timeout=MS)
            answer = transcript.locator(".msg.agent").last
            expect(answer).to_contain_text(f"You also told me: {STEER}.", timeout=MS)
        finally:
            browser.close()
    server.stop()
