"""Failpoints reached through a runtime: the store it opens, its attempts' model and tool
calls, armed by ``tether.testing.failpoints``, the ``tether_failpoints`` fixture or
``TETHER_FAILPOINTS`` (docs/testing.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from pydantic import JsonValue

from tether._failpoints import ARMED, disarm
from tether.engine import ManualClock, Runtime
from tether.errors import FailpointSpecInvalid, StoreUnavailable
from tether.store import Store
from tether.testing import Failpoints, failpoints

from .agents import echo_agent, loop_agent
from .waits import WAIT, advance_until

Make = Callable[..., Runtime]


@pytest.fixture(autouse=True)
def nothing_armed() -> Iterator[None]:
    assert not ARMED
    yield
    disarm()


async def settle(runtime: Runtime, submission_id: str) -> dict[str, JsonValue]:
    async with asyncio.timeout(WAIT):
        return await runtime.wait(submission_id)


async def test_a_model_error_is_a_providers_500(make_runtime: Make) -> None:
    """Tether's model retry policy takes a 500 like any other: tried again within the call,
    and when every try fails the submission settles with the provider's error."""
    with failpoints("model.request=error(once)") as armed:
        async with make_runtime({"echo": echo_agent()}) as runtime:
            retried = await runtime.dispatch("echo", "acme", "hi")
            assert await settle(runtime, retried.submission_id) == {
                "status": "succeeded",
                "result": "echo: hi",
            }
        assert (armed.hits("model.request"), armed.fired("model.request")) == (2, 1)
    with failpoints("model.request=error") as armed:
        async with make_runtime({"echo": echo_agent()}) as runtime:
            failed = await runtime.dispatch("echo", "acme", "hi")
            outcome = await settle(runtime, failed.submission_id)
            assert outcome["status"] == "failed", outcome
            assert "provider_error" in str(outcome) and "500" in str(outcome)
        assert armed.fired("model.request") == armed.hits("model.request") > 1


async def test_a_tool_error_reaches_the_agent_as_a_failed_call(make_runtime: Make) -> None:
    with failpoints("tool.call=error(once)") as armed:
        async with make_runtime({"loop": loop_agent()}) as runtime:
            receipt = await runtime.dispatch("loop", "acme", "lookup the price")
            outcome = await settle(runtime, receipt.submission_id)
            assert outcome == {"status": "succeeded", "result": "done after 1 tool results"}
            records = await runtime.records(receipt.conversation_id)
            completed = [r for r in records if r.kind == "tool_outcome"]
            assert len(completed) == 1 and "connection reset" in completed[0].to_json().decode()
        assert armed.fired("tool.call") == 1


async def test_a_model_delay_waits_on_the_runtimes_clock(
    make_runtime: Make, clock: ManualClock
) -> None:
    with failpoints("model.request=delay(30)"):
        async with make_runtime({"echo": echo_agent()}, lease=120.0) as runtime:
            receipt = await runtime.dispatch("echo", "acme", "hi")
            waited = asyncio.ensure_future(runtime.wait(receipt.submission_id))
            await asyncio.wait({waited}, timeout=0.2)  # real time passes; the clock does not
            assert not waited.done()
            started = clock.monotonic()
            outcome = await advance_until(clock, waited, 1.0)
            assert outcome["status"] == "succeeded"
            assert clock.monotonic() - started >= 30


async def test_a_store_error_under_a_run_is_recovered_and_settles_once(
    make_runtime: Make, store: Store, tether_failpoints: Failpoints
) -> None:
    """The settlement's commit fails once: the attempt ends, a later one settles it, and the
    log holds one settlement and verifies."""
    tether_failpoints.arm("store.append_settled=error(once)")
    async with make_runtime({"echo": echo_agent()}) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hi")
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
        records = await store.read(receipt.conversation_id)
        assert [r.kind for r in records].count("submission_settled") == 1
        assert await store.verify(receipt.conversation_id) == len(records)
    assert tether_failpoints.fired("store.append_settled") == 1


async def test_a_bad_environment_spec_fails_the_start(
    make_runtime: Make, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_FAILPOINTS", "store.append=error(sometimes)")
    runtime = make_runtime({"echo": echo_agent()})
    with pytest.raises(FailpointSpecInvalid, match="unknown trigger 'sometimes'"):
        await runtime.start()
    assert await store.list_submissions() == []


async def test_the_environment_arms_the_runtime(
    make_runtime: Make, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_FAILPOINTS", "store.admit=error(once)")
    async with make_runtime({"echo": echo_agent()}) as runtime:
        assert runtime.store is not store  # wrapped
        with pytest.raises(StoreUnavailable, match=r"failpoint store\.admit"):
            await runtime.dispatch("echo", "acme", "hi")
        receipt = await runtime.dispatch("echo", "acme", "hi")
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
    assert len(await store.list_submissions()) == 1


async def test_without_failpoints_nothing_is_wrapped(make_runtime: Make, store: Store) -> None:
    async with make_runtime({"echo": echo_agent()}) as runtime:
        assert runtime.store is store


async def test_a_store_error_in_the_reconciliation_at_start_is_retried(
    make_runtime: Make, tether_failpoints: Failpoints
) -> None:
    """Regression (the I/O-error loop): the start's reconciliation lists the submissions
    first; that read failing once ended the claim loop, and nothing ran until a restart."""
    tether_failpoints.arm("store.list_submissions=error(once)")
    async with make_runtime({"echo": echo_agent()}) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hi")
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
    assert tether_failpoints.fired("store.list_submissions") == 1
