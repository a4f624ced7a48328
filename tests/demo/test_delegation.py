"""The demo assistant delegates to the demo researcher (issue 21 item 10), end to end through
the engine on every store: one child, and two children fanned out from one model response."""

from collections.abc import Callable
from typing import TypeVar

import pytest

from tether.demo import demo_agents, demo_subagents
from tether.demo._model import delegated_topics
from tether.engine import EngineEvent, Runtime, ToolProgress
from tether.records import AssistantMessageCompleted, Record, TaskFinished, TaskSpawned
from tether.store import Submission, SubmissionStatus
from tether.testing.storetest import CompleteStore

from ..engine.test_runtime import settle

Make = Callable[..., Runtime]
T = TypeVar("T")


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.3")


def findings(topic: str) -> str:
    return f"three findings about {topic}: it matters, it is well documented"


def payloads(records: list[Record], kind: type[T]) -> list[T]:
    return [r.payload for r in records if isinstance(r.payload, kind)]


async def delegate(
    make_runtime: Make, store: CompleteStore, text: str
) -> tuple[str, list[Record], list[Submission], list[str]]:
    """Send ``text`` to the demo assistant: its answer, its log, its children (settled) and
    the research progress the children reported."""
    progress: list[str] = []

    def observe(event: EngineEvent) -> None:
        if isinstance(event, ToolProgress):
            progress.append(event.text)

    async with make_runtime(
        demo_agents(), subagents=demo_subagents(), observers=[observe]
    ) as runtime:
        receipt = await runtime.dispatch("assistant", "demo", text)
        settled = await settle(runtime, receipt.submission_id)
        assert settled["status"] == "succeeded", settled
        records = list(await runtime.records(receipt.conversation_id))
        children = await store.list_children(receipt.submission_id)
    return str(settled["result"]), records, children, progress


@pytest.mark.parametrize(
    ("text", "topics"),
    [
        ("ask the researcher about tides", ["tides"]),
        ("Ask the researcher about tides?", ["tides"]),
        ("ask the researcher about tides and the moon", ["tides and the moon"]),
        ("ask the researcher about tides and about the moon.", ["tides", "the moon"]),
        ("ask the researcher about a, about b, and about c", ["a", "b", "c"]),
        ("research tides", []),
        ("ask the assistant about tides", []),
    ],
)
def test_the_topics_a_message_hands_to_the_researcher(text: str, topics: list[str]) -> None:
    assert delegated_topics(text) == topics


async def test_ask_the_researcher_delegates_one_task(
    make_runtime: Make, store: CompleteStore
) -> None:
    answer, records, children, progress = await delegate(
        make_runtime, store, "ask the researcher about tides"
    )
    assert answer.startswith("The researcher says, on tides: ")
    assert findings("tides") in answer

    [child] = children
    assert child.key.agent == "researcher" and child.depth == 1
    assert child.status is SubmissionStatus.SETTLED
    assert child.settlement is not None and findings("tides") in str(child.settlement["result"])
    [spawned] = payloads(records, TaskSpawned)
    [finished] = payloads(records, TaskFinished)
    assert spawned.agent == "researcher" and spawned.child_submission_id == child.id
    assert finished.child_submission_id == child.id and finished.call_id == spawned.call_id
    # The child worked on its own prompt with the slow research tool, reporting progress.
    assert "researching tides: step 1 of 3" in progress


async def test_two_topics_fan_out_to_two_children_in_one_response(
    make_runtime: Make, store: CompleteStore
) -> None:
    answer, records, children, progress = await delegate(
        make_runtime, store, "ask the researcher about tides and about the moon"
    )
    lines = answer.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("The researcher says, on tides: ")
    assert findings("tides") in lines[0]
    assert lines[1].startswith("The researcher says, on the moon: ")
    assert findings("the moon") in lines[1]

    # Both task calls came in one model response...
    batches = [
        [call.args for call in p.message.tool_calls]
        for p in payloads(records, AssistantMessageCompleted)
        if p.message.tool_calls
    ]
    assert batches == [
        [
            {"agent": "researcher", "prompt": "research tides"},
            {"agent": "researcher", "prompt": "research the moon"},
        ]
    ]
    # ...and both children were spawned before either answer came back: they ran together.
    kinds = [r.kind for r in records if r.kind in ("task_spawned", "task_finished")]
    assert kinds == ["task_spawned", "task_spawned", "task_finished", "task_finished"]

    assert len(children) == 2
    assert all(c.status is SubmissionStatus.SETTLED for c in children)
    assert len({c.key.session for c in children}) == 2  # each child in a session of its own
    spawned = {p.child_submission_id for p in payloads(records, TaskSpawned)}
    finished = {p.child_submission_id for p in payloads(records, TaskFinished)}
    assert spawned == finished == {c.id for c in children}
    for topic in ("tides", "the moon"):
        assert f"researching {topic}: step 1 of 3" in progress


async def test_the_researcher_alone_has_no_task_tool(make_runtime: Make) -> None:
    async with make_runtime(demo_agents(), subagents=demo_subagents()) as runtime:
        receipt = await runtime.dispatch("researcher", "demo", "ask the researcher about tides")
        assert (await settle(runtime, receipt.submission_id))["result"] == (
            "You said: ask the researcher about tides"
        )


async def test_without_the_policy_the_assistant_echoes(make_runtime: Make) -> None:
    async with make_runtime(demo_agents()) as runtime:
        receipt = await runtime.dispatch("assistant", "demo", "ask the researcher about tides")
        assert (await settle(runtime, receipt.submission_id))["result"] == (
            "You said: ask the researcher about tides"
        )
