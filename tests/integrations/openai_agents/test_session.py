"""``TetherSession``: the Agents SDK's ``Session`` kept in a Tether session's log (issue 42
item 4), on the memory, SQLite and PostgreSQL stores, driven by an unmodified ``Runner.run``
whose real ``openai`` client talks to the fake OpenAI API."""

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.items import TResponseInputItem
from agents.memory import Session, SessionSettings, SQLiteSession

from tether.engine import Runtime, SessionState
from tether.integrations.openai_agents import TetherSession, UnsupportedConstruct, durable
from tether.integrations.openai_agents._session import CLEARED, ITEM, WITHDRAWN
from tether.journal import NOT_MINTED, SIGNAL_MEDIA_TYPE, Journal
from tether.messages import DataPart
from tether.records import ExecutionEnded, Signal
from tether.store import SessionKey, Store

from ...fakes.openai_server import Answer, FakeOpenAI
from .over_http import MODEL


def said(text: str) -> TResponseInputItem:
    return {"role": "user", "content": text}


async def signals(store: Store, session: TetherSession) -> list[str]:
    conversation_id = await session.conversation_id()
    assert conversation_id is not None
    records = await store.read(conversation_id)
    return [r.payload.type for r in records if isinstance(r.payload, Signal)]


def test_it_is_an_sdk_session() -> None:
    session = TetherSession("s", "memory://")
    assert isinstance(session, Session)
    assert session.session_id == "s" and session.key == SessionKey("openai-agents", "default", "s")


async def test_items_come_back_in_order_and_the_latest_n_when_limited(store: Store) -> None:
    session = TetherSession("s", store)
    assert await session.get_items() == [] and await session.conversation_id() is None
    await session.add_items([said("a"), said("b")])
    await session.add_items([])  # nothing to write: no execution
    await session.add_items([said("c")])
    assert await session.get_items() == [said("a"), said("b"), said("c")]
    assert await session.get_items(limit=2) == [said("b"), said("c")]
    assert await session.get_items(limit=0) == []
    limited = TetherSession("s", store, session_settings=SessionSettings(limit=1))
    assert await limited.get_items() == [said("c")]
    assert await limited.get_items(limit=5) == [said("a"), said("b"), said("c")]
    conversation_id = await session.conversation_id()
    assert conversation_id is not None
    records = await store.read(conversation_id)
    # One execution a change, in one commit: start, the items as signals, end.
    assert [r.kind for r in records] == [
        "conversation_created",
        *["execution_started", "signal", "signal", "execution_ended"],
        *["execution_started", "signal", "execution_ended"],
    ]
    assert await store.verify(conversation_id) == len(records)


async def test_pop_and_clear_withdraw_items_and_leave_the_log_append_only(store: Store) -> None:
    session = TetherSession("s", store)
    assert await session.pop_item() is None
    await session.clear_session()  # nothing to clear: nothing written
    assert await session.conversation_id() is None
    await session.add_items([said("a"), said("b"), said("c")])
    assert await session.pop_item() == said("c")
    assert await session.get_items() == [said("a"), said("b")]
    await session.clear_session()
    assert await session.get_items() == [] and await session.pop_item() is None
    await session.add_items([said("d")])
    assert await session.get_items() == [said("d")]
    assert await signals(store, session) == [ITEM, ITEM, ITEM, WITHDRAWN, CLEARED, ITEM]
    conversation_id = await session.conversation_id()
    assert conversation_id is not None
    records = await store.read(conversation_id)
    assert await store.verify(conversation_id) == len(records)  # still one hash chain
    # The withdrawn items are still in the log, for the audit trail.
    bodies = [r.payload.body for r in records if isinstance(r.payload, Signal)]
    assert '{"role":"user","content":"c"}' in bodies


async def test_the_session_writes_replay_from_the_log(store: Store) -> None:
    from tether.integrations.openai_agents._session import _SessionWrite

    session = TetherSession("s", store)
    await session.add_items([said("a"), said("b")])
    await session.pop_item()
    conversation_id = await session.conversation_id()
    assert conversation_id is not None
    journal = await Journal.open(store, conversation_id, fence=NOT_MINTED)
    assert await journal.replay(_SessionWrite()) == [{"signals": 2}, {"signals": 1}]
    ended = [r.payload for r in await store.read(conversation_id)]
    assert [p.output for p in ended if isinstance(p, ExecutionEnded)] == [
        {"signals": 2},
        {"signals": 1},
    ]


async def test_concurrent_writers_each_land_once(store: Store) -> None:
    first, second = TetherSession("s", store), TetherSession("s", store)
    await first.add_items([said("start")])
    await asyncio.gather(*(w.add_items([said(f"{n}")]) for n, w in enumerate([first, second])))
    assert sorted(_text(dict(i)) for i in await first.get_items()) == ["0", "1", "start"]
    popped = await asyncio.gather(first.pop_item(), second.pop_item())
    assert len({str(p) for p in popped}) == 2  # two pops take two items, not one twice
    assert len(await second.get_items()) == 1


QUIET = RunConfig(tracing_disabled=True)  # the SDK's traces would go to api.openai.com


def agent() -> Agent[Any]:
    return Agent(name="helper", instructions="Be brief.", model=MODEL)


async def test_an_unmodified_runner_keeps_its_conversation_in_tether(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/data"
    fake.add(Answer(text="Hello, Ann."), Answer(text="Your name is Ann."))
    async with TetherSession("ticket-42", url) as session:
        first = await Runner.run(agent(), "I am Ann.", session=session, run_config=QUIET)
    assert first.final_output == "Hello, Ann."
    # Another process, later: the history is read back from the store.
    async with TetherSession("ticket-42", url) as session:
        second = await Runner.run(agent(), "What is my name?", session=session, run_config=QUIET)
        items = await session.get_items()
        store = await session.store()
        conversation_id = await session.conversation_id()
        assert conversation_id is not None
        assert await store.verify(conversation_id) > 0
    assert second.final_output == "Your name is Ann."
    sent = fake.requests[1].body["input"]
    assert [(i.get("role"), _text(i)) for i in sent] == [
        ("user", "I am Ann."),
        ("assistant", "Hello, Ann."),
        ("user", "What is my name?"),
    ]
    assert [(dict(i).get("role"), _text(dict(i))) for i in items] == [
        ("user", "I am Ann."),
        ("assistant", "Hello, Ann."),
        ("user", "What is my name?"),
        ("assistant", "Your name is Ann."),
    ]


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content or [])


@pytest.mark.parametrize(
    "session",
    [lambda: TetherSession("s", "memory://"), lambda: SQLiteSession("s")],
    ids=["TetherSession", "SQLiteSession"],
)
def test_a_durable_agent_refuses_any_sdk_session(session: Any) -> None:
    with pytest.raises(UnsupportedConstruct, match="TetherSession"):
        durable(agent(), session=session())


async def test_the_session_is_listed_and_read_as_any_tether_session(
    store: Store, make_runtime: Callable[..., Runtime]
) -> None:
    session = TetherSession("ticket-7", store, agent="shop", instance="acme")
    await session.add_items([said("hi")])
    async with make_runtime({}) as runtime:
        [listed] = (await runtime.sessions(agent="shop")).sessions
        assert listed.key == SessionKey("shop", "acme", "ticket-7")
        assert listed.status == SessionState.IDLE
        [message] = await runtime.messages(listed.conversation_id)
    [part] = message.parts
    assert isinstance(part, DataPart) and part.media_type == SIGNAL_MEDIA_TYPE
    assert part.data == {"type": ITEM, "body": '{"role":"user","content":"hi"}'}
