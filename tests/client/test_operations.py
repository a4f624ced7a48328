"""Every operation of the client against the app in this process: each answer read into
the server's own wire model, each flow (``send``, ``wait``, the pending gates) followed to
its end."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import orjson
import pytest
from pydantic import JsonValue

from tether import errors
from tether.client import RequestFailed
from tether.demo import demo_agents, demo_subagents
from tether.engine import AgentDefinition, AgentSpec, WebhookSettings
from tether.journal import Turn
from tether.records import Record
from tether.stream import StreamTaskMessageFull
from tether.wire import (
    CallbackBody,
    DispatchAccepted,
    DispatchBody,
    ScheduleBody,
    UpgradeBody,
    WebhookStatus,
)

from ..engine.agents import echo_agent
from ..fakes.webhook_receiver import webhook_receiver
from .conftest import Served

Start = Callable[..., Awaitable[Served]]


class Asker:
    """Asks for a name and answers with it."""

    name, version = "asker", "1"

    async def run(self, turn: Turn) -> JsonValue:
        name = await turn.ask("What is your name?", schema={"type": "string"})
        return f"Hello, {name}!"


def asking() -> dict[str, AgentDefinition]:
    return {"asker": AgentDefinition(lambda instance, env: AgentSpec(harness=Asker()))}


async def demo(served: Start) -> Served:
    return await served(demo_agents(), settings={"subagents": demo_subagents()})


async def test_a_message_sent_and_waited_for_settles_and_its_session_reads_back(
    served: Start,
) -> None:
    client = (await demo(served)).client
    agents = await client.agents()
    assert {agent.name for agent in agents.agents} >= {"assistant", "researcher"}

    outcome = await client.send("assistant", "ann", "hello")
    assert outcome.settlement is not None and outcome.settlement.status == "succeeded"
    assert (outcome.approval, outcome.input) == (None, None)

    page = await client.records("assistant", "ann")
    assert all(isinstance(record, Record) for record in page.records)
    assert page.records[0].seq == 1 and page.next == page.records[-1].seq
    assert page.conversation_id == outcome.conversation_id
    conversation = await client.conversation("assistant", "ann")
    assert conversation.head == page.records[-1].seq

    history = await client.messages("assistant", "ann")
    assert history.messages[0].role == "user"
    view = await client.submission(outcome.submission_id)
    assert view.status == "settled" and view.settlement == outcome.settlement
    tree = await client.submission_tree(outcome.submission_id)
    assert tree.submission_id == outcome.submission_id
    assert (await client.open_submissions("assistant", "ann")).submissions == []
    listed = await client.sessions(agent="assistant")
    assert [item.conversation_id for item in listed.sessions] == [outcome.conversation_id]
    patched = await client.patch_metadata("assistant", "ann", {"customer": "acme", "tier": 2})
    assert patched.metadata == {"customer": "acme", "tier": 2}
    found = await client.sessions(q="HELLO", metadata={"customer": "acme", "tier": "2"})
    assert [item.metadata for item in found.sessions] == [patched.metadata]
    assert (await client.sessions(q="hello", metadata={"customer": "globex"})).sessions == []
    since = listed.sessions[0].last_activity_at
    assert len((await client.sessions(since=datetime.fromisoformat(since))).sessions) == 1

    assert (await client.verify(outcome.conversation_id)).ok
    exported = await client.export(outcome.conversation_id)
    lines = [orjson.loads(line) for line in exported.splitlines()]
    assert [line["seq"] for line in lines[:-1]] == [record.seq for record in page.records]
    spans = await client.spans(outcome.conversation_id)
    assert spans.spans
    spent = await client.conversation_usage(outcome.conversation_id)
    assert spent.conversation_id == outcome.conversation_id

    forked = await client.fork(outcome.conversation_id, 1, session="branch")
    assert (forked.session, forked.agent) == ("branch", "assistant")
    branch = await client.records("assistant", "ann", session="branch")
    assert branch.records[0].hash == page.records[0].hash  # the prefix is copied verbatim


async def test_dispatch_answers_where_it_stands_or_its_settlement(served: Start) -> None:
    client = (await demo(served)).client
    accepted = await client.dispatch("assistant", "bob", "hello", idempotency_key="k1")
    assert isinstance(accepted, DispatchAccepted)
    assert accepted.stream_url.startswith("/agents/assistant/bob?session=default")
    again = await client.dispatch("assistant", "bob", "hello", idempotency_key="k1")
    assert again.submission_id == accepted.submission_id
    settled = await client.dispatch("assistant", "bob", "hi again", wait=True, timeout=60)
    assert getattr(settled, "status", None) == "succeeded"
    sent = await client.send("assistant", "bob", "later", wait=False)
    assert sent.settlement is None
    assert (await client.wait(sent)).settlement is not None


async def test_an_approval_holds_the_outcome_until_it_is_decided(served: Start) -> None:
    client = (await demo(served)).client
    held = await client.send("assistant", "ann", "email bob@example.com: hi")
    assert held.approval is not None and held.approval.tool == "send_email"
    assert not held.queued_behind and not held.settled
    assert await client.pending_approval("assistant", "ann") == held.approval
    page = await client.approvals(agent="assistant")
    assert [item.approval_id for item in page.approvals] == [held.approval.approval_id]

    behind = await client.send("assistant", "ann", "hello")
    assert behind.approval == held.approval and behind.queued_behind

    receipt = await client.decide(held.approval.approval_id, "approve", approver="Ann")
    assert receipt.decision.kind == "approval_decided"
    done = await client.wait(held)
    assert done.settlement is not None and done.settlement.status == "succeeded"
    decided = await client.approvals(status="decided")
    assert decided.approvals[0].decision is not None
    assert decided.approvals[0].decision.approver == "Ann"
    assert (await client.wait(behind)).settled


async def test_an_input_holds_the_outcome_until_it_is_answered(served: Start) -> None:
    client = (await served(asking())).client
    held = await client.send("asker", "ann", "hi")
    assert held.input is not None and held.input.prompt == "What is your name?"
    assert (await client.inputs(agent="asker")).inputs == [held.input]
    assert await client.pending_input("asker", "ann") == held.input
    await client.answer(held.input.input_id, "Ann", responder="Ann")
    done = await client.wait(held)
    assert done.settlement is not None and done.settlement.result == "Hello, Ann!"
    answered = await client.inputs(status="answered")
    assert answered.inputs[0].answer == "Ann"


async def test_the_stream_reads_to_rest_in_either_view(served: Start) -> None:
    client = (await demo(served)).client
    outcome = await client.send("assistant", "ann", "hello")
    assert outcome.settled
    events = [item async for item in client.stream("assistant", "ann", follow=False)]
    assert events and all(":" in item.id for item in events)
    assert any(isinstance(item.data, StreamTaskMessageFull) for item in events)
    records = [item async for item in client.stream_records("assistant", "ann", follow=False)]
    assert [item.id for item in records] == [str(item.data.seq) for item in records]
    assert [item.event for item in records] == [item.data.kind for item in records]

    resumed = client.stream("assistant", "ann", follow=False, last_event_id=events[1].id)
    assert [item.id async for item in resumed] == [item.id for item in events[2:]]
    after = client.stream_records("assistant", "ann", follow=False, after=2)
    assert [item.data.seq async for item in after] == [r.data.seq for r in records[2:]]


async def test_session_controls(served: Start) -> None:
    client = (await demo(served)).client
    await client.send("assistant", "ann", "hello")
    assert (await client.abort("assistant", "ann")).aborted == []
    compacted = await client.compact("assistant", "ann")
    done = await client.submission(compacted.submission_id, wait=True, timeout=60)
    assert done.status == "settled"
    erased = await client.erase("assistant", "ann")
    assert erased.model_dump()["agent"] == "assistant"
    sent = await client.send("assistant", "bob", "hello", wait=False)
    aborted = await client.abort_submission(sent.submission_id)
    assert aborted.submission_id == sent.submission_id


async def test_the_application_routes(served: Start) -> None:
    client = (await demo(served)).client
    assert (await client.alive()).ok
    assert (await client.ready()).ready
    assert "tether_" in await client.metrics()
    me: Any = await client.me()
    assert me.model_dump(by_alias=True)
    assert (await client.budgets()).budgets == []
    with pytest.raises(errors.NotFound):
        await client.decide_budget("nope", "approve")
    sent = await client.send("assistant", "ann", "hello")
    spent = await client.usage(session=sent.conversation_id)
    assert spent.model_dump(by_alias=True)
    assert (await client.versions()).versions
    kept = await client.add_schedule(
        ScheduleBody(agent="assistant", instance="ann", body="tick", every=3600)
    )
    assert [item.id for item in (await client.schedules()).schedules] == [kept.id]
    await client.delete_schedule(kept.id)
    assert (await client.schedules()).schedules == []
    result = await client.upgrade_versions(
        UpgradeBody(
            agent="assistant", from_version="0", to_version=_version(await client.versions())
        )
    )
    assert result.model_dump(by_alias=True)


def _version(page: Any) -> str:
    return str(page.versions[0].version)


async def test_webhook_deliveries_are_listed_shown_and_resent(served: Start) -> None:
    settings = {"webhook_settings": WebhookSettings(secret="whsec-client", allow=["127.0.0.0/8"])}
    client = (await served({"echo": echo_agent()}, settings=settings)).client
    assert (await client.webhook_deliveries()).deliveries == []
    async with webhook_receiver() as receiver:
        callback = CallbackBody(url=receiver.url)
        sent = await client.send("echo", "acme", DispatchBody(body="hi", callback=callback))
        got = await receiver.next()
        delivery_id = got.headers["tether-delivery"]

        page = await client.webhook_deliveries(submission_id=sent.submission_id)
        [item] = page.deliveries
        assert (item.id, item.event, item.url) == (delivery_id, "settled", receiver.url)
        assert item.payload is None and page.next_cursor is None
        shown = await client.webhook_delivery(delivery_id)
        assert isinstance(shown.payload, dict)
        assert shown.payload["submissionId"] == sent.submission_id

        again = await client.resend_webhook(delivery_id)
        assert (again.id, again.attempts) == (delivery_id, 0)
        assert again.status in (WebhookStatus.PENDING, WebhookStatus.DELIVERED)
        assert (await receiver.next()).body == got.body

    later = DispatchBody(body="later", after_seconds=3600, callback=callback)
    await client.dispatch("echo", "acme", later)
    [held] = (await client.webhook_deliveries(status=WebhookStatus.HELD)).deliveries
    assert (await client.webhook_deliveries(status="held", limit=1)).next_cursor == held.id
    # The page after the held one, of held ones (the first delivery, resent after its
    # receiver closed, is still pending: where it sorts against this one is no concern here).
    assert (await client.webhook_deliveries(status="held", after=held.id)).deliveries == []
    with pytest.raises(RequestFailed) as refused:  # the HTTP layer's own: no class
        await client.resend_webhook(held.id)
    assert (refused.value.status, refused.value.type) == (409, "webhook_not_sendable")
    with pytest.raises(RequestFailed) as missing:  # an engine's error: no class either
        await client.webhook_delivery("wh_nope")
    assert (missing.value.status, missing.value.type) == (404, "webhook_not_found")
