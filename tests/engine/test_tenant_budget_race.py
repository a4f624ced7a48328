"""Concurrent runs of one tenant race for the last of its budget (issue 41, item 6): two
workers, each on its own connection to one SQLite file or one PostgreSQL schema, run eight
sessions of a tenant at once; the model calls never go over the tenant's limit, and its
tokens by less than one call's."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tether.agent import agent_spec, tool
from tether.engine import BUDGET_EXHAUSTED, AgentDefinition, Runtime, TenantBudget
from tether.messages import Message, ModelRequest, ModelResponse, TextPart, ToolCallPart, Usage
from tether.models import DeltaSink, ScriptedModel
from tether.store import SqliteStore, Store

from ..postgres import fresh_schema, store_url
from .conftest import FAST
from .test_runtime import settle

SESSIONS = 8
SIZES = itertools.cycle((60, 150, 100, 90))  # tokens per call: the largest is 150


class Racing(ScriptedModel):
    """Never stops; yields to the loop inside each call, so the runs' calls interleave."""

    def __init__(self) -> None:
        super().__init__(self._reply)
        self.tokens = 0

    def _reply(self, request: ModelRequest) -> ModelResponse:
        step = sum(1 for m in request.messages if m.role == "assistant") + 1
        size = next(SIZES)
        self.tokens += size
        message = Message(
            role="assistant",
            parts=(
                TextPart(text=f"step {step}"),
                ToolCallPart(call_id=f"c{step}", name="lookup", args={"q": str(step)}),
            ),
        )
        return ModelResponse(message=message, usage=Usage(input_tokens=size - 10, output_tokens=10))

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        await asyncio.sleep(0.001)  # a provider's round trip: the other runs go meanwhile
        return await super().request(request, stream)


@tool
async def lookup(q: str) -> str:
    """Look something up."""
    await asyncio.sleep(0)
    return f"found {q}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], Any]]:
    """Opens stores on one database: each worker its own connection to it."""
    opened: list[Store] = []
    schema = fresh_schema() if request.param == "postgres" else ""

    async def open_one() -> Store:
        store: Store
        if request.param == "sqlite":
            store = await SqliteStore.open(tmp_path)
        else:
            from tether.store.postgres import PostgresStore

            store = await PostgresStore.open(store_url(schema))
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()


@pytest.mark.parametrize(
    ("budget", "limit"),
    [(TenantBudget(model_calls=12), "modelCalls"), (TenantBudget(tokens=1500), "tokens")],
)
async def test_concurrent_runs_never_overspend_by_more_than_one_call(
    stores: Callable[[], Any], budget: TenantBudget, limit: str
) -> None:
    models = [Racing(), Racing()]
    settings: dict[str, Any] = {**FAST, "tenant_budgets": {"acme": budget}, "limit_poll": 0.01}
    one: Runtime
    two: Runtime
    async with (
        Runtime({"a": _define(models[0])}, await stores(), **settings) as one,
        Runtime({"a": _define(models[1])}, await stores(), **settings) as two,
    ):
        first = datetime.now(UTC)
        receipts = [
            await (one if n % 2 else two).dispatch(
                "a", "acme-desk", "go", session=f"s{n}", tenant="acme"
            )
            for n in range(SESSIONS)
        ]
        outcomes = await asyncio.gather(*(settle(one, r.submission_id) for r in receipts))
        # A day's budget: a race that straddles midnight (UTC) spends from each day's.
        last = datetime.now(UTC)
        moments = [first] if first.date() == last.date() else [first, last]
        usages = [(await one.tenant_usage("acme", at=moment)).spent for moment in moments]
    assert all(o["errorCode"] == BUDGET_EXHAUSTED for o in outcomes), outcomes
    assert {o["errorDetails"]["limit"] for o in outcomes} == {limit}  # type: ignore[index,call-overload]
    calls = sum(m.invocations for m in models)
    spent = sum(m.tokens for m in models)
    assert sum(day.model_calls for day in usages) == calls  # exact
    assert sum(day.tokens for day in usages) == spent
    # Each day's budget is never overspent, and the day the runs stopped in used its up.
    if budget.model_calls is not None:
        assert all(day.model_calls <= budget.model_calls for day in usages)  # never over
        assert usages[-1].model_calls == budget.model_calls
    else:
        assert budget.tokens is not None
        assert all(day.tokens < budget.tokens + 150 for day in usages)  # by less than a call
        assert usages[-1].tokens >= budget.tokens


def _define(model: ScriptedModel) -> AgentDefinition:
    spec = agent_spec(model, tools=[lookup])
    return AgentDefinition(lambda instance, env: spec)
