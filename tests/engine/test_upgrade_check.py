"""The deploy gate (``Runtime.check_upgrade``): sessions recorded under v1, one completed and
one parked on an approval, replayed against the newest version a runtime runs, on every
store: the same code is compatible, another prompt diverges (the parked one is pending, so
it fails the gate), a harness that makes other effects needs a patch (issue 38 item 4)."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec, Receipt, Runtime, UpgradeCheck
from tether.journal import Turn
from tether.store import Store
from tether.testing.storetest import CompleteStore

from .test_approvals import pending_gate
from .test_runtime import settle
from .test_versions import Outbox, assistant

Make = Callable[..., Runtime]


class Audited:
    """The built-in agent of a later deploy that runs a step of its own before anything else:
    an effect the recorded runs never made."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.version = inner.name, inner.version

    def pins(self) -> Any:
        return self.inner.pins()

    async def run(self, turn: Turn) -> JsonValue:
        await turn.step("audit", self._audit)
        result: JsonValue = await self.inner.run(turn)
        return result

    async def _audit(self) -> JsonValue:
        return "audited"


def audited(definition: AgentDefinition, version: str) -> AgentDefinition:
    def initialize(instance: str, env: Any) -> AgentSpec:
        spec = definition.initialize(instance, env)
        assert isinstance(spec, AgentSpec)
        return AgentSpec(harness=Audited(spec.harness), model=spec.model, tools=spec.tools)

    return AgentDefinition(initialize, version=version)


async def record_corpus(make_runtime: Make, store: Store, outbox: Outbox) -> tuple[str, str]:
    """Under v1: session ``done`` approved and finished, session ``parked`` waiting for its
    approval. Their conversation ids."""
    v1 = assistant(outbox, "You are v1.", version="v1")
    async with make_runtime({"assistant": v1}) as runtime:
        done = await runtime.dispatch("assistant", "acme", "mail bob", session="done")
        approval_id = await pending_gate(runtime, store, done)
        await runtime.approve(approval_id, "approve", approver="ann")
        assert (await settle(runtime, done.submission_id))["status"] == "succeeded"
        parked: Receipt = await runtime.dispatch("assistant", "acme", "mail bob", session="parked")
        await pending_gate(runtime, store, parked)
    return done.conversation_id, parked.conversation_id


async def gate(make_runtime: Make, agents: dict[str, Any], **filters: Any) -> list[UpgradeCheck]:
    runtime = make_runtime(agents)
    await runtime.start(worker=False)  # what `tether replay --against` runs: no worker
    return await runtime.check_upgrade(**filters)


def by_session(checks: list[UpgradeCheck]) -> dict[str, UpgradeCheck]:
    return {check.key.session: check for check in checks}


async def test_the_same_code_is_compatible_and_the_parked_run_pending(
    make_runtime: Make, store: CompleteStore
) -> None:
    outbox = Outbox()
    done, parked = await record_corpus(make_runtime, store, outbox)
    heads = {cid: await store.head(cid) for cid in (done, parked)}
    v1 = assistant(outbox, "You are v1.", version="v1")
    checks = by_session(await gate(make_runtime, {"assistant": v1}))
    assert set(checks) == {"done", "parked"}
    assert checks["done"].conversation_id == done and checks["parked"].conversation_id == parked
    assert [c.verdict for c in checks.values()] == ["compatible", "compatible"]
    assert not checks["done"].pending and checks["parked"].pending
    assert all(c.recorded_version == "v1" and c.version == "v1" for c in checks.values())
    assert not any(c.blocks for c in checks.values())
    assert outbox.sent == ["bob"]  # the finished run's, once: the check ran nothing
    assert {cid: await store.head(cid) for cid in (done, parked)} == heads


async def test_another_prompt_diverges_and_the_parked_run_blocks(
    make_runtime: Make, store: CompleteStore
) -> None:
    outbox = Outbox()
    await record_corpus(make_runtime, store, outbox)
    v2 = assistant(outbox, "You are v2.", version="v2")
    checks = by_session(await gate(make_runtime, {"assistant": v2}))
    for check in checks.values():
        assert check.verdict == "diverged" and check.differs == ("system prompt",)
        assert check.version == "v2" and check.recorded_version == "v1"
        assert check.seq is not None and "v1 -> v2" in check.detail
    assert checks["parked"].blocks and not checks["done"].blocks
    assert outbox.sent == ["bob"]


async def test_a_harness_that_makes_other_effects_needs_a_patch(
    make_runtime: Make, store: CompleteStore
) -> None:
    outbox = Outbox()
    await record_corpus(make_runtime, store, outbox)
    v2 = audited(assistant(outbox, "You are v1."), "v2")
    checks = by_session(await gate(make_runtime, {"assistant": v2}))
    assert {c.verdict for c in checks.values()} == {"needs_patch"}
    assert checks["parked"].blocks and "step audit" in checks["parked"].detail


async def test_filters_pick_the_sessions(make_runtime: Make, store: CompleteStore) -> None:
    outbox = Outbox()
    await record_corpus(make_runtime, store, outbox)
    v1 = assistant(outbox, "You are v1.", version="v1")
    agents = {"assistant": v1, "other": assistant(outbox, "Other.")}
    assert len(await gate(make_runtime, agents)) == 2
    assert await gate(make_runtime, agents, agent="other") == []
    assert len(await gate(make_runtime, agents, version="v1")) == 2
    assert await gate(make_runtime, agents, version="v0") == []
    assert len(await gate(make_runtime, agents, limit=1)) == 1
    later = datetime.now(UTC) + timedelta(days=1)
    assert await gate(make_runtime, agents, since=later) == []
    earlier = later - timedelta(days=30)
    assert len(await gate(make_runtime, agents, since=earlier.replace(tzinfo=None))) == 2
    assert await gate(make_runtime, {"other": assistant(outbox, "Other.")}) == []


async def test_a_failing_initializer_is_reported_not_raised(
    make_runtime: Make, store: CompleteStore
) -> None:
    outbox = Outbox()
    await record_corpus(make_runtime, store, outbox)

    def broken(instance: str, env: Any) -> AgentSpec:
        if instance == "acme":
            raise LookupError("no tenant acme")
        return assistant(outbox, "x").initialize(instance, env)  # type: ignore[return-value]

    checks = by_session(
        await gate(make_runtime, {"assistant": AgentDefinition(broken, version="v2")})
    )
    assert {c.verdict for c in checks.values()} == {"needs_patch"}
    assert "LookupError: no tenant acme" in checks["parked"].detail
    assert checks["parked"].blocks and not checks["done"].blocks


async def test_a_finished_session_with_a_queued_message_is_pending(
    make_runtime: Make, store: CompleteStore
) -> None:
    outbox = Outbox()
    await record_corpus(make_runtime, store, outbox)
    runtime = make_runtime({"assistant": assistant(outbox, "You are v2.", version="v2")})
    await runtime.start(worker=False)  # nothing runs what is admitted
    await runtime.dispatch("assistant", "acme", "and mail carol", session="done")
    checks = by_session(await runtime.check_upgrade())
    assert checks["done"].pending and checks["done"].blocks
