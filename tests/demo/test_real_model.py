"""``tether serve --demo`` with ``TETHER_MODEL=openai:…``: the real ``openai`` SDK, through
pydantic-ai's model layer, over HTTP to a fake OpenAI API on 127.0.0.1 that counts requests.

- A streamed answer with a tool call works end to end: the SSE stream shows the text deltas
  and the tool call; the submission carries the usage the fake reported and its cost.
- ``kill -9`` mid-answer, then a restart: the model call already journaled (the tool call) is
  not sent again, the clock tool does not run again, and the interrupted call is sent exactly
  once more, with the same messages. So the fake sees 3 requests in all: 2 before the kill,
  1 after it.
- ``tether replay`` sends none (the count stays at 3), with the fake's URL and key set, and
  with neither set: the provider's client is never built for a replay.

``openai:`` is the Responses API in pydantic-ai; ``openai-chat:`` is Chat Completions, whose
streamed tool calls come as ``delta.tool_calls`` split over chunks. Both are run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.messages import Usage
from tether.models import cost_of

from ..cli.conftest import ServerProcess, start_server
from ..fakes.openai_server import Answer, Call, FakeOpenAI
from ..processes import eventually, start

pytestmark = pytest.mark.process

AGENT = "/agents/assistant/me"
APIS = {"openai:gpt-4.1-mini": "/v1/responses", "openai-chat:gpt-4.1-mini": "/v1/chat/completions"}
TETHER = [sys.executable, "-c", "from tether.cli import main; main()"]
WAIT = 60.0  # seconds any one wait may take, on a loaded machine


@pytest.fixture(params=sorted(APIS))
def model(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def provider_env(model: str, fake: FakeOpenAI) -> dict[str, str]:
    return {"TETHER_MODEL": model, "OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "fake"}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def events(server: ServerProcess, **params: str) -> list[tuple[str, dict[str, Any]]]:
    """The session's SSE stream, read to its end: (event, data). Only for a session at rest:
    the stream of a running one lasts until it is."""
    answer = httpx.get(f"{server.url}{AGENT}", params=params, timeout=WAIT)
    answer.raise_for_status()
    found = []
    for frame in answer.text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in frame.splitlines() if ": " in line and line[0] != ":"
        )
        if "data" in fields:
            found.append((fields.get("event", "message"), json.loads(fields["data"])))
    return found


def payloads(server: ServerProcess, kind: str) -> list[dict[str, Any]]:
    """The payloads of the session's records of ``kind`` so far (it may be running)."""
    answer = httpx.get(f"{server.url}{AGENT}/records", params={"limit": 1000}, timeout=WAIT)
    answer.raise_for_status()
    return [r["payload"] for r in answer.json()["records"] if r["kind"] == kind]


def settled(server: ServerProcess, submission_id: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{server.url}/submissions/{submission_id}", params={"wait": True}, timeout=WAIT + 30
    )
    answer.raise_for_status()
    found: dict[str, Any] = answer.json()
    assert found["status"] == "settled", found
    return found


def usage(server: ServerProcess, submission_id: str) -> dict[str, Any]:
    tree = httpx.get(f"{server.url}/submissions/{submission_id}/tree", timeout=WAIT)
    tree.raise_for_status()
    found: dict[str, Any] = tree.json()["usage"]
    return found


def replays(data: Path, conversation: str, *envs: dict[str, str]) -> list[tuple[int, str, str]]:
    """``tether replay <conversation> --demo``, once with each of ``envs`` exactly (no key
    unless given), side by side: each one's exit code, stdout and stderr."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    clean.pop("TETHER_MODEL", None)
    command = [*TETHER, "replay", conversation, "--demo", "--store", f"sqlite:///{data}"]
    running = [
        start(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean | env)
        for env in envs
    ]
    done = []
    for process in running:
        out, err = process.communicate(timeout=WAIT + 30)
        done.append((process.returncode, out, err))
    return done


def test_a_streamed_answer_with_a_tool_call(model: str, fake: FakeOpenAI, tmp_path: Path) -> None:
    answer = "By the clock, it is noon, UTC."
    fake.add(
        Answer(calls=(Call("clock"),), input_tokens=300, output_tokens=12),
        Answer(text=answer, input_tokens=340, output_tokens=9, cached_tokens=256),
    )
    server = start_server(tmp_path / "data", tmp_path / "serve.log", **provider_env(model, fake))
    try:
        reply = httpx.post(
            f"{server.url}{AGENT}",
            params={"wait": True},
            json={"body": "what time is it?"},
            timeout=WAIT + 30,  # the server holds ?wait for 60 s
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["status"] == "succeeded" and reply.json()["result"] == answer
        submission = reply.json()["submissionId"]

        assert fake.count == 2
        assert f"tether model {model} (from TETHER_MODEL)" in (tmp_path / "serve.log").read_text()
        first, second = fake.requests
        assert {r.path for r in (first, second)} == {APIS[model]} and first.stream
        offered = {tool.get("name") or tool["function"]["name"] for tool in first.body["tools"]}
        assert offered == {"clock", "research", "send_email", "task"}
        assert "Use your tools rather than guessing" in first.conversation  # the real prompt
        assert "call_1_0" in second.conversation  # the clock's result, under the fake's id

        records = events(server)
        kinds = [event for event, _ in records]
        [called] = [data["payload"] for event, data in records if event == "tool_called"]
        assert called["tool"] == "clock" and called["callId"] == "call_1_0"
        assert kinds.index("tool_called") < kinds.index("tool_outcome")
        models = {data["payload"]["model"] for event, data in records if event == "model_called"}
        assert models == {model}
        deltas = [
            data["payload"]["text"] for event, data in records if event == "assistant_text_delta"
        ]
        assert "".join(deltas) == answer

        stream = [data for _, data in events(server, view="stream")]  # canonical events
        contents = [event["content"] for event in stream if event["type"] == "full"]
        [request] = [c for c in contents if c["type"] == "tool_request"]
        assert (request["name"], request["tool_call_id"]) == ("clock", "call_1_0")
        [response] = [c for c in contents if c["type"] == "tool_response"]
        assert response["tool_call_id"] == "call_1_0" and not response["is_error"]
        text = [e["delta"]["text_delta"] for e in stream if e["type"] == "delta"]
        assert "".join(text) == answer

        used = usage(server, submission)
        assert used["calls"] == 2
        assert (used["inputTokens"], used["outputTokens"]) == (640, 21)
        assert used["cacheReadTokens"] == 256
        calls = (
            Usage(input_tokens=300, output_tokens=12),
            Usage(input_tokens=340, output_tokens=9, cache_read_tokens=256),
        )
        prices = [cost_of("openai:gpt-4.1-mini", call) for call in calls]
        assert None not in prices  # gpt-4.1-mini has a price, under either API's name
        assert used["cost"] == pytest.approx(sum(p for p in prices if p is not None))
    finally:
        server.stop()


# Two servers and two replays, each a process importing pydantic-ai and the openai SDK: 16 s
# on an idle machine, 60 s on a loaded 2-core one (two busy loops beside other suites).
@pytest.mark.timeout(300)
def test_a_resume_after_kill_repeats_no_recorded_call_and_a_replay_sends_none(
    model: str, fake: FakeOpenAI, tmp_path: Path
) -> None:
    data, log = tmp_path / "data", tmp_path / "serve.log"
    # More than 1 KiB streams before the stall, so the journal has written a delta record of
    # the partial answer (its size threshold, not its timer) when the server is killed.
    text = "The clock says it is noon. " * 60
    fake.add(
        Answer(calls=(Call("clock"),)),
        Answer(text=text, chunk=64, hang_after=20),  # 1,280 characters, then a stall
        Answer(text=text, chunk=64),  # the re-sent call, answered in full
    )
    env = provider_env(model, fake)
    first = start_server(data, log, **env)
    try:
        accepted = httpx.post(
            f"{first.url}{AGENT}", json={"body": "what time is it?"}, timeout=WAIT
        ).json()
        assert fake.hung.wait(WAIT), log.read_text()
        eventually(lambda: payloads(first, "assistant_text_delta"), "a delta of the answer")
    finally:
        first.kill()  # SIGKILL, mid-answer
    fake.release()
    assert fake.count == 2  # the tool call, answered and journaled; the stalled answer

    second = start_server(data, log, **env)
    try:
        done = settled(second, accepted["submissionId"])
        assert done["settlement"] == {"status": "succeeded", "result": text}
        requests = fake.requests
        assert len(requests) == 3  # one more: the interrupted call, once
        assert requests[2].conversation == requests[1].conversation  # the same call, re-sent
        assert requests[0].conversation not in {r.conversation for r in requests[1:]}
        assert len(payloads(second, "tool_called")) == 1  # the clock ran once
        assert len(payloads(second, "tool_outcome")) == 1
        completions = payloads(second, "assistant_message_completed")
        interrupted = [c for c in completions if c.get("interrupted")]
        assert len(interrupted) == 1  # the killed attempt's partial answer, closed as such
        partial = interrupted[0]["message"]["parts"][0]["text"]
        assert len(partial) >= 1024 and text.startswith(partial) and partial != text
        assert [c["message"]["parts"][0].get("text") for c in completions][-1] == text
        assert usage(second, accepted["submissionId"])["calls"] == 2  # answered calls only
    finally:
        second.stop()

    # With the fake's URL and key (a request would reach the fake), and with neither: the
    # provider's client would need the key to be built, so it is never built.
    keyless = {"TETHER_MODEL": model}
    for code, out, err in replays(data, accepted["conversationId"], env, keyless):
        assert code == 0, err
        assert text in out and "model and tool invocations: 0" in out
    assert fake.count == 3  # a replay sent nothing


def test_an_abort_while_a_tool_runs_leaves_a_session_the_provider_still_takes(
    model: str, fake: FakeOpenAI, tmp_path: Path
) -> None:
    """The issue's session: "research x", aborted while the research runs, then "what time
    is it?". The fake refuses, as the real API does (400), a history whose tool call has no
    result; the abort's settlement closes it, so the next turn is answered."""
    fake.add(
        Answer(calls=(Call("research", {"topic": "x"}),)),
        Answer(text="It is noon."),
    )
    env = provider_env(model, fake) | {"TETHER_DEMO_RESEARCH_SECONDS": "600"}
    server = start_server(tmp_path / "data", tmp_path / "serve.log", **env)
    try:
        first = httpx.post(f"{server.url}{AGENT}", json={"body": "research x"}, timeout=WAIT)
        first.raise_for_status()
        eventually(lambda: payloads(server, "tool_called"), "the research under way")
        httpx.post(f"{server.url}{AGENT}/abort", json={}, timeout=WAIT).raise_for_status()
        assert settled(server, first.json()["submissionId"])["settlement"]["status"] == "aborted"
        [closing] = payloads(server, "tool_outcome")
        assert closing["status"] == "unknown" and "aborted" in closing["content"]

        reply = httpx.post(
            f"{server.url}{AGENT}",
            params={"wait": True},
            json={"body": "what time is it?"},
            timeout=WAIT + 30,
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["status"] == "succeeded", (reply.json(), fake.refused)
        assert reply.json()["result"] == "It is noon." and fake.refused == []
        assert "call_1_0" in fake.requests[-1].conversation  # the research call and its result
    finally:
        server.stop()
