"""The demo assistant's scripted behaviours, end to end through the engine."""

import asyncio
import re
from collections.abc import Callable

import pytest
from pydantic import JsonValue

from tether.demo import demo_agents
from tether.engine import EngineEvent, Runtime, ToolProgress
from tether.journal import Decision, Journal
from tether.store import Store, SubmissionStatus

from ..engine.test_control import wait_for_status
from ..engine.test_runtime import settle

Make = Callable[..., Runtime]


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.3")


async def ask(runtime: Runtime, text: str) -> object:
    receipt = await runtime.dispatch("assistant", "demo", text)
    return (await settle(runtime, receipt.submission_id))["result"]


async def test_hello_time_and_structured_answers(make_runtime: Make) -> None:
    async with make_runtime(demo_agents()) as runtime:
        assert "You said: hello" in str(await ask(runtime, "hello"))
        assert re.fullmatch(
            r"It is \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.",
            str(await ask(runtime, "what time is it?")),
        )
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "n": {"type": "number"},
                "ok": {"type": "boolean"},
            },
            "required": ["name", "n", "ok"],
        }
        receipt = await runtime.dispatch(
            "assistant", "demo", {"body": "describe", "resultSchema": schema}
        )
        assert (await settle(runtime, receipt.submission_id))["result"] == {
            "name": "example",
            "n": 1,
            "ok": True,
        }


async def test_research_reports_progress_and_mentions_a_steer(
    make_runtime: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "3")  # the steer lands while it runs
    progress: list[str] = []
    reported = asyncio.Event()

    def observe(event: EngineEvent) -> None:
        if isinstance(event, ToolProgress):
            progress.append(event.text)
            reported.set()

    async with make_runtime(demo_agents(), observers=[observe]) as runtime:
        receipt = await runtime.dispatch("assistant", "demo", "research tides")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.RUNNING)
        async with asyncio.timeout(60):
            await reported.wait()  # the research tool has started
        await runtime.steer("assistant", "demo", "focus on the moon")
        answer = str((await settle(runtime, receipt.submission_id))["result"])
    assert answer.startswith("Here is what I found: three findings about tides")
    assert "You also told me: focus on the moon." in answer
    assert progress[:1] == ["researching tides: step 1 of 3"]


@pytest.mark.parametrize(
    ("decision", "args", "expected"),
    [
        ("approve", None, "Email sent: dry-run email to bob@example.com: lunch?"),
        ("reject", None, "I did not send the email: Tool execution was denied by ann: no."),
        (
            "edit",
            {"to": "carol@example.com", "text": "dinner?"},
            "Email sent: dry-run email to carol@example.com: dinner?",
        ),
    ],
)
async def test_send_email_waits_for_a_human(
    make_runtime: Make,
    store: Store,
    decision: Decision,
    args: dict[str, JsonValue] | None,
    expected: str,
) -> None:
    async with make_runtime(demo_agents()) as runtime:
        receipt = await runtime.dispatch("assistant", "demo", "email bob@example.com: lunch?")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        state = await (
            await Journal.open(store, receipt.conversation_id, fence=0)
        ).inspect_approval()
        assert state is not None and state.approval_id is not None
        assert state.tool_call.args == {"to": "bob@example.com", "text": "lunch?"}
        reason = "no" if decision == "reject" else None
        await runtime.approve(state.approval_id, decision, approver="ann", reason=reason, args=args)
        assert (await settle(runtime, receipt.submission_id))["result"] == expected
