"""The protocols' own clients against a real server: AG-UI's ``HttpAgent`` (``@ag-ui/client``)
runs the agent through ``POST .../ag-ui`` and verifies a ``GET ?view=ag-ui``; the AI SDK's
``DefaultChatTransport`` (what ``useChat`` posts with) reads ``POST .../ai-sdk``, and a ``GET
?view=ai-sdk`` is parsed with the ``ai`` package's UI message chunk schema and read into
messages with its ``readUIMessageStream`` (tests/protocols/check.mjs).

Their packages come from the npm registry, which no test may reach: ``.ci/run`` installs them
(``npm ci`` in tests/protocols). Without Node or that install these tests are skipped, with
the reason (under ``CI``, they fail).
"""

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether.demo import demo_agents

from .conftest import Server

# The clients read the same views on every store (tests/http/test_protocol_views.py runs
# each store): one durable store here, for a node process per test.
pytestmark = [pytest.mark.process, pytest.mark.parametrize("store", ["sqlite"], indirect=True)]

Serve = Callable[..., Any]
CHECK = Path(__file__).resolve().parents[1] / "protocols"
STREAM = "/agents/assistant/me"


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "no node: install Node.js 20 or newer"
    if not (CHECK / "node_modules").is_dir():
        return f"the protocol clients are not installed: cd {CHECK} && npm ci"
    return None


@pytest.fixture(autouse=True)
def node_and_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.3")
    missing = _missing()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)


async def check(*args: str) -> Any:
    """What check.mjs made of a stream (its clients' objects, as JSON)."""
    node = shutil.which("node")
    assert node is not None
    process = await asyncio.create_subprocess_exec(
        node,
        str(CHECK / "check.mjs"),
        *args,
        cwd=CHECK,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(120):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()[-4000:]
    return json.loads(out)


async def test_ag_ui_http_agent_runs_the_agent_and_verifies_the_view(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    url = f"{server.url}{STREAM}"
    ran = await check("ag-ui-post", f"{url}/ag-ui", "thread-1", "run-1", "what time is it")
    roles = [message["role"] for message in ran["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert ran["messages"][1]["toolCalls"][0]["function"]["name"] == "clock"
    assert ran["messages"][-1]["content"].startswith("It is ")
    assert ran["events"][-1]["type"] == "RUN_FINISHED"
    parked = await check("ag-ui-post", f"{url}/ag-ui", "thread-1", "run-2", "email bob@x.org: hi")
    outcome = parked["events"][-1]["outcome"]
    assert outcome["type"] == "interrupt" and outcome["interrupts"][0]["reason"] == "approval"
    # An abort settles the parked run: the session's view, verified whole, ends it cancelled.
    await server.client.post(f"{STREAM}/abort", json={"session": "thread-1"})
    await server.client.post(
        STREAM, params={"wait": True}, json={"body": "hello", "session": "thread-1"}
    )
    seen = await check("ag-ui-get", f"{url}?session=thread-1&view=ag-ui")
    ends = [e for e in seen["events"] if e["type"] in ("RUN_FINISHED", "RUN_ERROR")]
    assert [e.get("outcome", {}).get("type") for e in ends] == [None, "cancelled", None]


async def test_use_chat_transport_reads_the_reply_and_the_view(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    url = f"{server.url}{STREAM}"
    read = await check("ai-sdk-post", f"{url}/ai-sdk", "chat-1", "m-1", "research tides")
    parts = read["message"]["parts"]
    tools = [part for part in parts if part["type"] == "dynamic-tool"]
    assert [(t["toolName"], t["state"]) for t in tools] == [("research", "output-available")]
    assert parts[-1]["type"] == "text" and parts[-1]["state"] == "done"
    await check("ai-sdk-post", f"{url}/ai-sdk", "chat-1", "m-2", "email bob@x.org: hi")
    await server.client.post(f"{STREAM}/abort", json={"session": "chat-1"})
    seen = await check("ai-sdk-get", f"{url}?session=chat-1&view=ai-sdk")
    assert seen["header"] == "v1"
    assert [m["id"] for m in seen["messages"]] == [
        c["messageId"] for c in seen["chunks"] if c["type"] == "start"
    ]
    endings = [c["type"] for c in seen["chunks"] if c["type"] in ("finish", "abort", "error")]
    assert endings == ["finish", "abort", "finish"]
    approval = next(p for p in seen["messages"][1]["parts"] if p["type"] == "dynamic-tool")
    assert approval["toolName"] == "send_email"


async def test_ag_ui_resume_answers_the_interrupt_and_the_run_goes_on(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    url = f"{server.url}{STREAM}/ag-ui"
    ran = await check("ag-ui-resume", url, "thread-1", "email bob@x.org: hi")
    assert ran["first"][-1]["outcome"]["type"] == "interrupt"
    then = [(e["type"], e.get("name")) for e in ran["then"]]
    assert then[:2] == [("RUN_STARTED", None), ("CUSTOM", "approval_decided")]
    assert ("TOOL_CALL_RESULT", None) in then and then[-1] == ("RUN_FINISHED", None)
    assert [m["role"] for m in ran["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert ran["messages"][-1]["content"].startswith("Email sent")


async def test_use_chat_approval_response_decides_and_the_message_goes_on(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    url = f"{server.url}{STREAM}/ai-sdk"
    read = await check("ai-sdk-approve", url, "chat-1", "email bob@x.org: hi")
    [asked] = [p for p in read["asked"]["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert asked["state"] == "approval-requested"
    message = read["then"]["message"]
    assert message["id"] == read["asked"]["message"]["id"]  # the same message, continued
    [done] = [p for p in message["parts"] if p["type"] == "dynamic-tool"]
    assert done["state"] == "output-available" and done["approval"]["approved"] is True
    assert message["parts"][-1]["text"].startswith("Email sent")


async def test_use_chat_resume_reconnects_to_the_run_going_on(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    api = f"{server.url}{STREAM}/ai-sdk"
    assert await check("ai-sdk-reconnect", api, "chat-1") == {"stream": None}  # no chat yet
    said = await check("ai-sdk-post", api, "chat-1", "m-1", "hello")  # settles: nothing to resume
    assert said["message"]["parts"][-1]["text"] == "You said: hello"
    assert await check("ai-sdk-reconnect", api, "chat-1") == {"stream": None}
    await check("ai-sdk-post", api, "chat-1", "m-2", "email bob@x.org: hi")  # parks
    again = await check("ai-sdk-reconnect", api, "chat-1")
    [part] = [p for p in again["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert part["state"] == "approval-requested" and part["toolName"] == "send_email"
