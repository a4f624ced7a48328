"""``Runtime.from_app``: the runtime an App describes, the same one ``tether serve --app``
runs (tests/cli/test_serve_app.py serves this App): subagents that work, the process
environment reaching initializers, the App's redactor and schedules, and what a caller
overrides."""

import asyncio
from typing import Any

import pytest

from tether.engine import App, ManualClock, Runtime, SystemClock
from tether.journal import Journal
from tether.records import ToolOutcome
from tether.store import Store

from .conftest import FAST
from .served_app import SECRET, build
from .waits import WAIT, advance_until, until_emitted


async def _payloads(store: Store, conversation_id: str) -> list[Any]:
    journal = await Journal.open(store, conversation_id)
    return [record.payload for record in await journal.records()]


async def test_an_app_runs_its_subagents_env_redactor_and_schedules(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APP_GREETING", "hello from the environment")
    runtime = Runtime.from_app(build(), store, clock=clock, **FAST)
    try:
        await runtime.start()
        assert runtime.config.env["APP_GREETING"] == "hello from the environment"
        boss = await runtime.dispatch("boss", "acme", "go")
        leaky = await runtime.dispatch("leaky", "acme", "go")
        async with asyncio.timeout(WAIT):
            settled = await runtime.wait(boss.submission_id)
            await runtime.wait(leaky.submission_id)
        assert settled["result"] == (
            "hello from the environment; helper said: helped with lend a hand"
        )
        outcomes = [
            p for p in await _payloads(store, leaky.conversation_id) if isinstance(p, ToolOutcome)
        ]
        assert outcomes and all(SECRET not in str(o) for o in outcomes)
        assert "[redacted by the app]" in str(outcomes[0])
        [schedule] = await runtime.schedules()
        assert (schedule.schedule.agent, schedule.schedule.instance) == ("helper", "ticker")

        async def ticked() -> bool:
            return any(s.key.instance == "ticker" for s in await store.list_submissions())

        await advance_until(clock, until_emitted(runtime, ticked), step=1)
    finally:
        await runtime.close()


async def test_what_a_caller_gives_overrides_the_app() -> None:
    app = App(build().agents, "memory://", lease=7.0, env={"APP_GREETING": "given"})
    runtime = Runtime.from_app(app, lease=9.0, clock=SystemClock())
    assert runtime.config.lease == 9.0 and runtime.config.env == {"APP_GREETING": "given"}
    assert Runtime.from_app(app).config.lease == 7.0
    assert repr(app) == "App(agents=['boss', 'helper', 'leaky'], store='memory://')"


def test_an_app_refuses_what_is_not_one() -> None:
    with pytest.raises(TypeError, match="agents must be a mapping"):
        App([])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="authenticate must be a function"):
        App({}, authenticate="module:function")  # type: ignore[arg-type]
