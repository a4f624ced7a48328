"""Observer events, failing observers, interceptor order and context, refusals."""

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

from tether.engine import EngineEvent, Operation, Runtime
from tether.models import ScriptedModel
from tether.store import Store
from tether.testing import RecordingTools

from .agents import echo_agent, loop_agent
from .test_runtime import settle

Make = Callable[..., Runtime]
tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")


async def test_observers_see_the_lifecycle_with_record_correlation(
    make_runtime: Make, store: Store
) -> None:
    events: list[EngineEvent] = []
    async with make_runtime(
        {"loop": loop_agent(RecordingTools())}, observers=[events.append]
    ) as runtime:
        receipt = await runtime.dispatch("loop", "acme", "lookup it")
        await settle(runtime, receipt.submission_id)
    kinds = [e.kind for e in events]
    expected = [
        "admitted",
        "claimed",
        "attempt_started",
        "operation_started",
        "turn_started",
        "tool_started",
        "tool_ended",
        "turn_ended",
        "operation_ended",
        "settled",
    ]
    it = iter(kinds)
    assert all(kind in it for kind in expected), kinds  # a subsequence, in this order
    tool_end = next(e for e in events if e.kind == "tool_ended")
    outcome = next(r for r in await store.read(receipt.conversation_id) if r.kind == "tool_outcome")
    assert tool_end.correlation.submission_id == outcome.submission_id == receipt.submission_id
    assert tool_end.correlation.attempt_id == outcome.attempt_id


async def test_a_failing_observer_never_fails_a_run(make_runtime: Make) -> None:
    def explode(event: EngineEvent) -> None:
        raise RuntimeError("observer bug")

    async def explode_async(event: EngineEvent) -> None:
        raise RuntimeError("async observer bug")

    async with make_runtime({"echo": echo_agent()}, observers=[explode, explode_async]) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hi")
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"


async def test_interceptors_compose_in_order_and_carry_context(make_runtime: Make) -> None:
    seen: list[str] = []

    async def outer(op: Operation, call_next: Callable[[], Awaitable[Any]]) -> Any:
        if op.boundary == "attempt":
            tenant.set("acme-tenant")
        seen.append(f"outer>{op.boundary}")
        try:
            return await call_next()
        finally:
            seen.append(f"outer<{op.boundary}")

    async def inner(op: Operation, call_next: Callable[[], Awaitable[Any]]) -> Any:
        seen.append(f"inner>{op.boundary}:{tenant.get()}")
        return await call_next()

    async with make_runtime(
        {"loop": loop_agent(RecordingTools())}, interceptors=[outer, inner]
    ) as runtime:
        receipt = await runtime.dispatch("loop", "acme", "lookup it")
        await settle(runtime, receipt.submission_id)
    assert seen[:4] == [
        "outer>attempt",
        "inner>attempt:acme-tenant",
        "outer>operation",
        "inner>operation:acme-tenant",
    ]
    assert "inner>turn:acme-tenant" in seen and "inner>tool:acme-tenant" in seen
    assert seen[-1] == "outer<attempt"


async def test_an_interceptor_that_refuses_settles_run_failed_without_a_model_call(
    make_runtime: Make,
) -> None:
    async def gate(op: Operation, call_next: Callable[[], Awaitable[Any]]) -> Any:
        if op.boundary == "attempt":
            raise PermissionError("tenant suspended")
        return await call_next()

    async def skipper(op: Operation, call_next: Callable[[], Awaitable[Any]]) -> Any:
        return None  # never calls next

    for interceptor, message in ((gate, "tenant suspended"), (skipper, "refused")):
        model = ScriptedModel(["never"])
        async with make_runtime({"echo": echo_agent(model)}, interceptors=[interceptor]) as runtime:
            receipt = await runtime.dispatch("echo", "acme", "hi")
            outcome = await settle(runtime, receipt.submission_id)
        assert outcome["errorCode"] == "run_failed" and message in str(outcome["error"])
        assert model.invocations == 0


async def test_a_submission_claimed_at_its_admission_is_admitted_then_claimed(
    make_runtime: Make,
) -> None:
    """The admission that claims (the claim loop is up, the session free) and the run it starts
    at once: observers hear of the admission first."""
    events: list[EngineEvent] = []
    async with make_runtime(
        {"loop": loop_agent(RecordingTools())}, observers=[events.append]
    ) as runtime:
        warm_up = await runtime.dispatch("loop", "warm-up", "hello")
        await settle(runtime, warm_up.submission_id)
        events.clear()
        receipt = await runtime.dispatch("loop", "acme", "hello")
        await settle(runtime, receipt.submission_id)
    kinds = [e.kind for e in events]
    assert kinds[:3] == ["admitted", "claimed", "attempt_started"], kinds
