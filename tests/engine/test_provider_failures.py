"""A model provider that fails, reached the way a user's agent reaches it: the real ``openai``
SDK through pydantic-ai's OpenAI model, over HTTP to the fake OpenAI API on 127.0.0.1.

One retry policy holds: the SDK sends each request once (its own retries are off), Tether
tries the model call again within the attempt, after the provider's ``Retry-After`` or a
backoff asked of the runtime's clock, up to the budget, each try bounded by the timeout; when
the budget is spent the submission settles with a typed code and the status, never going back
to the engine's attempt loop. A request the provider refused (a 400) is not tried again.

The clock is manual: a backoff moves it on at once and is recorded, and a timeout fires when
the test moves time past it, once the request is where the test wants it; no test waits for
either in real time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import JsonValue

from tether.agent import agent_spec
from tether.engine import (
    AgentDefinition,
    AgentSpec,
    DeltaReceived,
    EngineEvent,
    ManualClock,
    Receipt,
    Runtime,
)
from tether.errors import ModelTransientError
from tether.messages import Message
from tether.models import ModelRetryPolicy, ScriptedModel
from tether.models.pydantic_ai import PydanticAIModel
from tether.records import AssistantMessageCompleted, ModelCalled
from tether.store import MemoryStore

from ..fakes.openai_server import Answer, FakeOpenAI
from ..journal.harnesses import EchoHarness

Make = Callable[..., Runtime]
MODEL = "openai-chat:gpt-4.1-mini"
KEY = "sk-provider-failures"  # not a word the fake's error text holds (a secret is masked)


class BackoffClock(ManualClock):
    """A manual clock on which a sleep moves time on at once: the backoffs asked of it are
    recorded, and cost no real time."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await self.advance(seconds)


@pytest.fixture
def clock() -> BackoffClock:
    return BackoffClock()


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FakeOpenAI]]:
    """Starts the fake OpenAI API with a script (and an answer for every request past it),
    with the SDK pointed at it."""
    with contextlib.ExitStack() as stack:

        def start(*script: Answer, otherwise: Answer | None = None) -> FakeOpenAI:
            fake = stack.enter_context(FakeOpenAI(script, otherwise=otherwise))
            monkeypatch.setenv("OPENAI_BASE_URL", fake.url)
            monkeypatch.setenv("OPENAI_API_KEY", KEY)
            return fake

        yield start


def runtime_for(
    make_runtime: Make,
    clock: ManualClock,
    *,
    retries: int = 3,
    timeout: float | None = None,
    stream: bool = False,
    **settings: Any,
) -> Runtime:
    model = PydanticAIModel(MODEL, stream=stream)
    retry = ModelRetryPolicy(retries=retries, max_elapsed=60)
    spec = agent_spec(model, model_name=MODEL, model_timeout=timeout, model_retry=retry)
    agents = {"bot": AgentDefinition(lambda instance, env: spec)}
    # A lease longer than every backoff: moving time on never takes the claim away.
    return make_runtime(agents, clock=clock, lease=600, **settings)


async def reached(fake: FakeOpenAI, count: int) -> None:
    """Once ``count`` requests in all have come to the fake."""
    assert await asyncio.to_thread(fake.wait_for_requests, count, 60)


async def ask(runtime: Runtime, text: str = "hi") -> tuple[Receipt, dict[str, JsonValue]]:
    receipt = await runtime.dispatch("bot", "acme", text)
    async with asyncio.timeout(60):  # bounds a hang only; a loaded machine has room
        return receipt, await runtime.wait(receipt.submission_id)


async def model_records(runtime: Runtime, receipt: Receipt) -> tuple[int, list[bool]]:
    """How many model calls the log holds, and per completion whether it was interrupted."""
    page = await runtime.records(receipt.conversation_id)
    called = [r for r in page if isinstance(r.payload, ModelCalled)]
    completed = [r.payload for r in page if isinstance(r.payload, AssistantMessageCompleted)]
    return len(called), [bool(c.interrupted) for c in completed]


async def test_a_rate_limit_forever_is_tried_the_budget_and_settles_typed(
    make_runtime: Make, clock: BackoffClock, provider: Callable[..., FakeOpenAI]
) -> None:
    fake = provider(otherwise=Answer(status=429, retry_after="1"))
    async with runtime_for(make_runtime, clock, retries=3) as runtime:
        receipt, settled = await ask(runtime)
        info = await runtime.submission(receipt.submission_id)
        assert await model_records(runtime, receipt) == (1, [])
    assert fake.count == 4  # budget + 1: the SDK retried none of them itself
    assert clock.slept == [1.0, 1.0, 1.0]  # the provider's Retry-After, asked of the clock
    assert settled["status"] == "failed"
    assert settled["errorCode"] == "provider_rate_limited"
    assert settled["errorDetails"] == {"status": 429, "tries": 4}
    error = str(settled["error"])
    assert error.startswith("the provider rate-limited the request (HTTP 429)")
    assert "gave up after 4 requests" in error and "status_code:" not in error
    assert info.submission.attempt_count == 1  # not handed back to the engine's attempts


async def test_a_rate_limit_then_an_answer_succeeds_with_one_journaled_call(
    make_runtime: Make, clock: BackoffClock, provider: Callable[..., FakeOpenAI]
) -> None:
    fake = provider(Answer(status=429, retry_after="2"), Answer(text="hello after a wait"))
    async with runtime_for(make_runtime, clock) as runtime:
        receipt, settled = await ask(runtime)
        assert await model_records(runtime, receipt) == (1, [False])
        info = await runtime.submission(receipt.submission_id)
    assert settled == {"status": "succeeded", "result": "hello after a wait"}
    assert fake.count == 2 and clock.slept == [2.0]
    assert info.submission.attempt_count == 1


@pytest.mark.parametrize("status", [500, 503])
async def test_a_server_error_then_an_answer_succeeds(
    status: int, make_runtime: Make, clock: BackoffClock, provider: Callable[..., FakeOpenAI]
) -> None:
    fake = provider(Answer(status=status), Answer(status=status), Answer(text="recovered"))
    async with runtime_for(make_runtime, clock) as runtime:
        receipt, settled = await ask(runtime)
        assert await model_records(runtime, receipt) == (1, [False])
    assert settled == {"status": "succeeded", "result": "recovered"}
    assert fake.count == 3
    # No Retry-After: exponential backoff from 1 s, with jitter (between half and all of it).
    first, second = clock.slept
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0


async def test_a_bad_request_is_not_retried(
    make_runtime: Make, clock: BackoffClock, provider: Callable[..., FakeOpenAI]
) -> None:
    fake = provider(otherwise=Answer(status=400))
    async with runtime_for(make_runtime, clock) as runtime:
        _, settled = await ask(runtime)
    assert fake.count == 1 and clock.slept == []
    assert settled["errorCode"] == "provider_error"
    assert settled["errorDetails"] == {"status": 400, "tries": 1}
    assert "HTTP 400" in str(settled["error"]) and "not retried" in str(settled["error"])


async def test_a_hanging_provider_times_out_and_settles_provider_timeout(
    make_runtime: Make, clock: BackoffClock, provider: Callable[..., FakeOpenAI]
) -> None:
    fake = provider(otherwise=Answer(hang=True))
    async with runtime_for(make_runtime, clock, retries=1, timeout=30) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "hi")
        for count in (1, 2):  # the try, then one retry: each hangs until time passes 30 s
            await reached(fake, count)
            await clock.advance(30)
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
        assert await model_records(runtime, receipt) == (1, [])
    assert fake.count == 2 and len(clock.slept) == 1
    assert settled["errorCode"] == "provider_timeout"
    assert settled["errorDetails"] == {"tries": 2}
    assert str(settled["error"]).startswith("the provider sent nothing for 30 s")


async def test_a_stream_that_stalls_half_way_times_out_and_is_closed(
    make_runtime: Make, clock: BackoffClock, provider: Callable[..., FakeOpenAI]
) -> None:
    stalls = Answer(text="a first piece, then nothing", hang_after=1)
    fake = provider(stalls, Answer(text="whole this time"))
    streamed = asyncio.Event()

    def on_event(event: EngineEvent) -> None:
        if isinstance(event, DeltaReceived):
            streamed.set()

    runtime = runtime_for(make_runtime, clock, timeout=30, stream=True, observers=[on_event])
    async with runtime:
        receipt = await runtime.dispatch("bot", "acme", "hi")
        async with asyncio.timeout(60):
            await streamed.wait()  # the first piece came: the stream is open, then stalls
        await clock.advance(30)
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
        # The stalled stream is closed by an interrupted completion; the retry answers the
        # same call, and only its whole answer is in the transcript.
        assert await model_records(runtime, receipt) == (1, [True, False])
        messages = await runtime.messages(receipt.conversation_id)
    assert settled == {"status": "succeeded", "result": "whole this time"}
    assert fake.count == 2 and len(clock.slept) == 1
    assert [m.text for m in messages if m.role == "assistant"] == ["whole this time"]


def test_the_timeout_is_the_environments_unless_the_runtime_sets_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TETHER_MODEL_TIMEOUT", "45")
    assert Runtime({}, MemoryStore()).model_calls.timeout == 45
    assert Runtime({}, MemoryStore(), model_timeout=7).model_calls.timeout == 7
    monkeypatch.delenv("TETHER_MODEL_TIMEOUT")
    assert Runtime({}, MemoryStore()).model_calls.timeout == 300


async def test_a_compactions_summary_is_retried_within_the_call(
    make_runtime: Make, clock: BackoffClock
) -> None:
    asked: list[int] = []

    async def summarize(messages: list[Message]) -> str:
        asked.append(len(messages))
        if len(asked) == 1:
            raise ModelTransientError("overloaded")
        return "the story so far"

    spec = AgentSpec(harness=EchoHarness(), model=ScriptedModel(["hi"]), summarize=summarize)
    definition = AgentDefinition(lambda instance, env: spec)
    async with make_runtime({"echo": definition}, clock=clock, lease=600) as runtime:
        first = await runtime.dispatch("echo", "acme", "hello")
        async with asyncio.timeout(60):
            await runtime.wait(first.submission_id)
            compacted = await runtime.compact("echo", "acme")
            settled = await runtime.wait(compacted.submission_id)
        info = await runtime.submission(compacted.submission_id)
    assert settled["result"] == {"compacted": True, "firstKeptSeq": 3}
    assert len(asked) == 2 and len(clock.slept) == 1 and info.submission.attempt_count == 1
