"""What durability costs a served request: its commits, counted on SQLite's writer."""

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tether.demo import demo_agents
from tether.store import SqliteStore

from .conftest import Server


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    async with await SqliteStore.open(tmp_path) as opened:
        yield opened


async def _commits_of(server: Server, store: SqliteStore, instance: str, body: str) -> int:
    before = store._writer.commits
    answer = await server.client.post(
        f"/agents/assistant/{instance}", params={"wait": "true"}, json={"body": body}
    )
    assert answer.status_code == 200 and answer.json()["status"] == "succeeded", answer.text
    return store._writer.commits - before


async def test_a_one_turn_answer_costs_two_commits(
    asgi: Callable[..., Any], store: SqliteStore
) -> None:
    """Admission (which claims it: the server runs what it admits) and settlement (the whole
    execution, from its start to the settled record, in one append). Nothing between them
    needs to be durable: the model call repeats nothing if a crash makes it run again."""
    server: Server = await asgi(demo_agents())
    await _commits_of(server, store, "warm-up", "hello")  # the claim loop is up and running
    assert await _commits_of(server, store, "ann", "hello") == 2  # a new session
    assert await _commits_of(server, store, "ann", "hello again") == 2  # and an old one


async def test_a_tool_turn_makes_the_tools_intent_and_outcome_durable(
    asgi: Callable[..., Any], store: SqliteStore
) -> None:
    """The intent before the tool runs (with the execution's start and the model call riding
    along), its outcome after: two commits more than an answer without a tool."""
    server: Server = await asgi(demo_agents())
    await _commits_of(server, store, "warm-up", "hello")
    assert await _commits_of(server, store, "bob", "what time is it?") == 4
