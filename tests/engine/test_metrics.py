"""The runtime's own metrics observer: provider failures by their bounded class, each try a
model call, the store's state read as gauges."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tether.demo import demo_agents, demo_subagents
from tether.engine import ManualClock
from tether.engine._metrics import provider_error_class
from tether.messages import ModelRequest
from tether.models import ScriptedModel

from .agents import echo_agent

Make = Callable[..., Any]


class Unavailable(Exception):
    status_code = 503


def test_a_provider_failure_is_one_of_five_labels() -> None:
    assert provider_error_class(429, "provider_rate_limited") == "429"
    assert provider_error_class(503, "provider_error") == "5xx"
    assert provider_error_class(400, "provider_error") == "4xx"
    assert provider_error_class(408, "provider_timeout") == "timeout"
    assert provider_error_class(None, "provider_timeout") == "timeout"  # Tether's own timer
    assert provider_error_class(None, "provider_error") == "connection"


async def test_a_5xx_and_a_timeout_retried_then_answered(
    make_runtime: Make, clock: ManualClock
) -> None:
    tries = 0

    def answer(request: ModelRequest) -> Any:
        nonlocal tries
        tries += 1
        if tries == 1:
            return Unavailable("bad gateway")
        if tries == 2:
            return TimeoutError("read timed out")
        return "fine"

    async with make_runtime({"echo": echo_agent(ScriptedModel(answer))}) as runtime:
        receipt = await runtime.dispatch("echo", "a", "hello")
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
        assert settled["status"] == "succeeded"
        snapshot = await runtime.metrics_snapshot()
    errors = snapshot.counter("tether_provider_errors_total")
    assert errors == {("echo", "5xx"): 1, ("echo", "timeout"): 1}
    assert snapshot.counter("tether_model_retries_total") == {("echo",): 2}
    assert snapshot.counter("tether_model_calls_total") == {
        ("echo", "test", "error"): 2,
        ("echo", "test", "ok"): 1,
    }
    assert snapshot.gauge("tether_attempts_running") == {(): 0}
    assert snapshot.gauge("tether_submissions_queued") == {}  # nothing unsettled


async def test_a_subagent_child_counts_as_admitted_where_it_was_spawned(
    make_runtime: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.05")
    runtime = make_runtime(demo_agents(), subagents=demo_subagents())
    async with runtime:
        receipt = await runtime.dispatch(
            "assistant", "me", "ask the researcher about A and about B"
        )
        async with asyncio.timeout(60):
            settled = await runtime.wait(receipt.submission_id)
        assert settled["status"] == "succeeded", settled
        snapshot = await runtime.metrics_snapshot()
    admitted = snapshot.counter("tether_submissions_admitted_total")
    assert admitted == {("assistant",): 1, ("researcher",): 2}
    settled_counts = snapshot.counter("tether_submissions_settled_total")
    assert settled_counts[("researcher", "succeeded")] == 2
    assert settled_counts[("assistant", "succeeded")] == 1
