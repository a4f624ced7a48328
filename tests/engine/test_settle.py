"""Every way a run ends leaves a history a real provider accepts: an abort, a timeout, a
failure or an exhausted budget closes what the run left open (a tool call without its
result, a message cut mid-stream) in the commit that settles it, so the session's next turn
hands its model a whole history."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tether.engine import Runtime
from tether.messages import ModelRequest
from tether.models import ScriptedModel
from tether.store import SubmissionStatus

from ..fakes.provider_rules import refusal
from ..journal.harnesses import planner
from .agents import agent, slow_tools
from .test_runtime import settle

Make = Callable[..., Runtime]


def recording_model() -> ScriptedModel:
    """The planner, but refusing what a provider refuses, as a provider would."""

    def answer(request: ModelRequest) -> object:
        problem = refusal(request.messages)
        if problem is not None:
            raise AssertionError(f"a provider would refuse this request: {problem}")
        return planner(request)

    return ScriptedModel(answer)


async def test_an_abort_while_a_tool_runs_leaves_a_history_a_provider_accepts(
    make_runtime: Make,
) -> None:
    from ..journal.harnesses import LoopHarness

    started = asyncio.Event()
    model = recording_model()
    tools = slow_tools(60, started)
    async with make_runtime({"slow": agent(LoopHarness(), model, tools)}) as runtime:
        first = await runtime.dispatch("slow", "acme", "lookup slowly")
        await asyncio.wait_for(started.wait(), 60)
        await runtime.abort("slow", "acme")
        assert (await settle(runtime, first.submission_id))["status"] == "aborted"
        second = await runtime.dispatch("slow", "acme", "what time is it?")
        outcome = await settle(runtime, second.submission_id)
        assert outcome == {"status": "succeeded", "result": "echo: what time is it?"}
        history = model.calls[-1].messages
        assert refusal(history) is None
        results = [m for m in history if m.role == "tool"]
        assert len(results) == 1 and "aborted" in results[0].parts[0].content  # type: ignore[union-attr]
        _ = SubmissionStatus
        _ = pytest
