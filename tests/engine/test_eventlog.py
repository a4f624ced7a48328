"""The runtime logs takeovers, approvals, the resumes they lead to and failed settlements at
INFO, with their ids; a resume after a decision or an answer is no recovery."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

import pytest

from tether._ids import new_ulid
from tether.engine import ManualClock, RecoveryDecided, Runtime, SubmissionResumed
from tether.journal import Journal, Turn
from tether.store import Store, SubmissionStatus
from tether.testing import RecordingTools

from .agents import agent, echo_agent, loop_agent
from .test_control import wait_for_status
from .test_inputs import AskOnce, pending_input

Make = Callable[..., Runtime]
EVENTS = "tether.engine.events"


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == EVENTS and r.levelno == logging.INFO]


def _the_resume_line(caplog: pytest.LogCaptureFixture) -> str:
    """The one INFO line of a resume, with no ``recovery`` line beside it."""
    messages = [line.getMessage() for line in _lines(caplog)]
    assert not [m for m in messages if m.startswith("recovery")], messages
    [resumed] = [m for m in messages if m.startswith("resume ")]
    return resumed


class Failing:
    name, version = "failing", "1"

    async def run(self, turn: Turn) -> str:
        raise RuntimeError("the harness broke")


async def test_a_failed_settlement_is_logged_with_its_ids(
    make_runtime: Make, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tether")
    async with make_runtime({"broken": agent(Failing())}) as runtime:
        receipt = await runtime.dispatch("broken", "acme", "hello")
        await runtime.wait(receipt.submission_id)
    [line] = _lines(caplog)
    message = line.getMessage()
    assert message.startswith("settled failed [run_failed]: RuntimeError: the harness broke ")
    assert f"submission={receipt.submission_id}" in message
    assert f"conversation={receipt.conversation_id}" in message
    assert "session=broken/acme/default" in message
    assert line.__dict__["submission_id"] == receipt.submission_id  # also as structured fields
    assert line.__dict__["conversation_id"] == receipt.conversation_id


async def test_a_success_is_not_logged_at_info(
    make_runtime: Make, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tether")
    async with make_runtime({"echo": echo_agent()}) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hello")
        await runtime.wait(receipt.submission_id)
    assert _lines(caplog) == []


async def test_an_approval_decision_is_logged_with_its_approver(
    make_runtime: Make, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tether")
    async with make_runtime({"mail": loop_agent(RecordingTools())}) as runtime:
        receipt = await runtime.dispatch("mail", "acme", "send_email to bob")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        journal = await Journal.open(store, receipt.conversation_id, fence=0)
        state = await journal.inspect_approval()
        assert state is not None and state.approval_id is not None
        await runtime.approve(state.approval_id, "reject", approver="ann", reason="not today")
        await runtime.wait(receipt.submission_id)
    [line] = [r for r in _lines(caplog) if r.getMessage().startswith("approval ")]
    message = line.getMessage()
    assert message.startswith(f"approval {state.approval_id} decided reject by ann: not today "), (
        message
    )
    assert f"submission={receipt.submission_id}" in message
    assert f"conversation={receipt.conversation_id}" in message
    assert line.__dict__["approval_id"] == state.approval_id


async def test_a_resume_after_a_decision_is_logged_as_one_not_as_a_recovery(
    make_runtime: Make, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tether")
    events: list[object] = []
    agents = {"mail": loop_agent(RecordingTools())}
    async with make_runtime(agents, observers=[events.append]) as runtime:
        receipt = await runtime.dispatch("mail", "acme", "send_email to bob")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        [gate] = (await runtime.approvals()).gates
        await runtime.approve(gate.approval_id, "approve", approver="ann")
        assert (await runtime.wait(receipt.submission_id))["status"] == "succeeded"
    resumed = _the_resume_line(caplog)
    assert resumed.startswith(f"resume after approval {gate.approval_id} was decided ")
    assert f"submission={receipt.submission_id}" in resumed
    assert not [e for e in events if isinstance(e, RecoveryDecided)]
    [event] = [e for e in events if isinstance(e, SubmissionResumed)]
    assert (event.reason, event.gate_id, event.children) == ("approval", gate.approval_id, ())


async def test_a_resume_after_an_answer_is_logged_as_one_not_as_a_recovery(
    make_runtime: Make, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tether")
    async with make_runtime({"ask": agent(AskOnce())}) as runtime:
        receipt = await runtime.dispatch("ask", "acme", "hello")
        input_id = await pending_input(runtime, receipt.submission_id)
        await runtime.answer(input_id, "Ann", responder="bob")
        assert (await runtime.wait(receipt.submission_id))["result"] == "Ann"
    resumed = _the_resume_line(caplog)
    assert resumed.startswith(f"resume after input {input_id} was answered "), resumed


async def test_a_takeover_of_an_expired_lease_is_logged(
    make_runtime: Make, store: Store, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tether")
    admitting = make_runtime({"echo": echo_agent()})
    await admitting.start(worker=False)
    receipt = await admitting.dispatch("echo", "acme", "hello")
    now = clock.now()
    [claimed] = await store.claim_runnable(  # a worker that died holding the claim
        attempt_ids=[new_ulid()],
        owner_id="worker-dead",
        lease_expires_at=now - timedelta(seconds=1),
        now=now,
    )
    assert claimed.submission.id == receipt.submission_id
    async with make_runtime({"echo": echo_agent()}) as runtime:
        async with asyncio.timeout(30):
            await runtime.wait(receipt.submission_id)
    takeovers = [r.getMessage() for r in _lines(caplog) if "recovery " in r.getMessage()]
    assert any(
        m.startswith("recovery lease_expired")
        and f"submission={receipt.submission_id}" in m
        and f"conversation={receipt.conversation_id}" in m
        for m in takeovers
    ), takeovers
