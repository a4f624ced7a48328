"""Agent versions across a deploy: a run parked on an approval under one system prompt and
decided after a deploy of another goes on under its agent's policy (pinned waits for a worker
of its version, upgrade goes on with the new code and journals the change, strict refuses a
change within a version), on every store; versions are named, served side by side, and moved
by an operator; a parent and its subagent child each follow their own agent's version.

The same across real crashes (SIGKILLed ``tether serve`` processes of two versions on one
store) is in tests/scale/test_versions.py."""

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tether.agent import agent_spec, tool
from tether.engine import (
    VERSION_DIVERGED,
    AgentDefinition,
    AgentSpec,
    AgentVersions,
    EngineEvent,
    Receipt,
    RecoveryDecided,
    Runtime,
    SubmissionInfo,
    version_digest,
)
from tether.errors import UnknownVersion
from tether.journal import Journal
from tether.messages import ModelRequest, ToolResultPart
from tether.models import ScriptedModel, ToolUse
from tether.records import ApprovalDecided, ExecutionStarted, ToolOutcome, VersionChanged
from tether.store import WAIT_FOR_CHILDREN, Store, Submission, SubmissionStatus
from tether.testing.storetest import CompleteStore

from .test_approvals import pending_gate
from .test_control import wait_for_status
from .test_runtime import settle
from .waits import until_emitted

Make = Callable[..., Runtime]


class Outbox:
    """The emails a gated tool sent: each send counts, so a repeat would show."""

    def __init__(self) -> None:
        self.sent: list[str] = []


def assistant(outbox: Outbox, prompt: str, **definition: Any) -> AgentDefinition:
    """The built-in agent with ``prompt``: it asks to email bob (a gated tool), then answers."""

    @tool(requires_approval=True)
    def send_email(to: str) -> str:
        """Send an email."""
        outbox.sent.append(to)
        return f"sent to {to}"

    def reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "user":
            return ToolUse("send_email", {"to": "bob"})
        return "done"

    spec = agent_spec(ScriptedModel(reply), system_prompt=prompt, tools=[send_email])
    return AgentDefinition(lambda instance, env: spec, **definition)


async def park_on_v1(make_runtime: Make, store: Store, outbox: Outbox) -> tuple[Receipt, str]:
    """Dispatch under v1 and stop the server while the run waits for its approval."""
    async with make_runtime({"assistant": assistant(outbox, "You are v1.", version="v1")}) as rt:
        receipt = await rt.dispatch("assistant", "acme", "mail bob")
        approval_id = await pending_gate(rt, store, receipt)
    return receipt, approval_id


async def records_of(store: Store, receipt: Receipt) -> list[Any]:
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    return [record.payload for record in await journal.records()]


async def test_pinned_a_parked_run_waits_for_a_worker_of_its_version(
    make_runtime: Make, store: CompleteStore
) -> None:
    """The default policy: a deploy of v2 alone leaves the decided v1 run queued, shown as
    waiting for a worker of its version; a process that still runs v1 finishes it on v1."""
    outbox = Outbox()
    receipt, approval_id = await park_on_v1(make_runtime, store, outbox)
    v2 = assistant(outbox, "You are v2.", version="v2")
    async with make_runtime({"assistant": v2}) as runtime:
        await runtime.approve(approval_id, "approve", approver="ann")
        submission = await store.get_submission(receipt.submission_id)
        assert submission.status is SubmissionStatus.QUEUED and submission.version == "v1"
        info = await runtime.submission(receipt.submission_id)
        assert info.waits_for_a_worker
        assert outbox.sent == []
    both = assistant(
        outbox,
        "You are v2.",
        version="v2",
        previous=[assistant(outbox, "You are v1.", version="v1")],
    )
    async with make_runtime({"assistant": both}) as runtime:
        assert await settle(runtime, receipt.submission_id) == {
            "status": "succeeded",
            "result": "done",
        }
        new = await runtime.dispatch("assistant", "acme", "mail bob again", session="other")
        assert (await store.get_submission(new.submission_id)).version in (None, "v2")
    assert outbox.sent == ["bob"]
    payloads = await records_of(store, receipt)
    assert not [p for p in payloads if isinstance(p, VersionChanged)]
    assert (await store.get_submission(receipt.submission_id)).version == "v1"


async def test_upgrade_a_parked_run_goes_on_with_the_new_code(
    make_runtime: Make, store: CompleteStore
) -> None:
    """The recorded completion (its tool call) stands; the approved tool runs once, on v2; the
    change is journaled before the tool's outcome, naming what differs."""
    outbox = Outbox()
    receipt, approval_id = await park_on_v1(make_runtime, store, outbox)
    v2 = assistant(outbox, "You are v2.", version="v2", policy="upgrade")
    async with make_runtime({"assistant": v2}) as runtime:
        await runtime.approve(approval_id, "approve", approver="ann")
        settled = await settle(runtime, receipt.submission_id)
    assert settled == {"status": "succeeded", "result": "done"}
    assert outbox.sent == ["bob"]
    payloads = await records_of(store, receipt)
    [changed] = [p for p in payloads if isinstance(p, VersionChanged)]
    assert (changed.from_version, changed.to_version, changed.reason) == ("v1", "v2", "upgrade")
    assert "system prompt" in changed.differs
    kinds = [type(p) for p in payloads]
    assert kinds.index(VersionChanged) < kinds.index(ToolOutcome)
    assert kinds.index(ApprovalDecided) < kinds.index(VersionChanged)
    assert (await store.get_submission(receipt.submission_id)).version == "v2"


async def test_pinned_a_change_within_a_version_is_journaled_not_fatal(
    make_runtime: Make, store: CompleteStore
) -> None:
    """A version's code that changed under the same name (a prompt edited, the name kept):
    the run goes on and its log says what changed."""
    outbox = Outbox()
    receipt, approval_id = await park_on_v1(make_runtime, store, outbox)
    edited = assistant(outbox, "You are v1, edited.", version="v1")
    async with make_runtime({"assistant": edited}) as runtime:
        await runtime.approve(approval_id, "approve", approver="ann")
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
    assert outbox.sent == ["bob"]
    [changed] = [p for p in await records_of(store, receipt) if isinstance(p, VersionChanged)]
    assert (changed.from_version, changed.to_version) == ("v1", "v1")


async def test_strict_a_change_within_a_version_stops_the_run_naming_it_until_a_fix(
    make_runtime: Make, store: CompleteStore
) -> None:
    """Under ``strict`` a recorded input that changed stops the run before anything runs, and
    says which versions and what differs; the run waits (``version_diverged``) and the code it
    started on, deployed again, finishes it."""
    outbox = Outbox()
    receipt, approval_id = await park_on_v1(make_runtime, store, outbox)
    heard: list[EngineEvent] = []

    async def hear(event: EngineEvent) -> None:
        heard.append(event)

    edited = assistant(outbox, "You are v1, edited.", version="v1", policy="strict")
    async with make_runtime({"assistant": edited}, observers=[hear]) as runtime:
        await runtime.approve(approval_id, "approve", approver="ann")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
    submission = await store.get_submission(receipt.submission_id)
    assert submission.wait_reason == VERSION_DIVERGED and outbox.sent == []
    [stopped] = [
        e for e in heard if isinstance(e, RecoveryDecided) and e.decision == VERSION_DIVERGED
    ]
    assert "v1 -> v1" in stopped.detail and "system prompt" in stopped.detail
    fixed = assistant(outbox, "You are v1.", version="v1", policy="strict")
    async with make_runtime({"assistant": fixed}) as runtime:
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
    assert outbox.sent == ["bob"]


async def test_strict_a_deploy_of_another_version_waits_as_pinned(
    make_runtime: Make, store: CompleteStore
) -> None:
    outbox = Outbox()
    receipt, approval_id = await park_on_v1(make_runtime, store, outbox)
    v2 = assistant(outbox, "You are v2.", version="v2", policy="strict")
    async with make_runtime({"assistant": v2}) as runtime:
        await runtime.approve(approval_id, "approve", approver="ann")
        assert (await runtime.submission(receipt.submission_id)).waits_for_a_worker
    assert outbox.sent == []


async def test_an_operator_moves_parked_runs_with_an_audit_record(
    make_runtime: Make, store: CompleteStore
) -> None:
    outbox = Outbox()
    receipt, approval_id = await park_on_v1(make_runtime, store, outbox)
    v2 = assistant(outbox, "You are v2.", version="v2")
    async with make_runtime({"assistant": v2}) as runtime:
        states = {s.version: s for s in await runtime.version_states("assistant")}
        assert states["v1"].waiting == 1 and states["v1"].gates == 1
        assert not states["v1"].served_here and states["v2"].newest_here
        assert states["v2"].retirable and not states["v1"].retirable
        with pytest.raises(UnknownVersion):
            await runtime.upgrade_parked("assistant", from_version="v1", to_version="v3")
        moved = await runtime.upgrade_parked(
            "assistant", from_version="v1", to_version="v2", actor="ops"
        )
        assert moved == [receipt.submission_id]
        await runtime.approve(approval_id, "approve", approver="ann")
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
        states = {s.version: s for s in await runtime.version_states("assistant")}
        assert "v1" not in states or states["v1"].retirable
    assert outbox.sent == ["bob"]
    changes = [p for p in await records_of(store, receipt) if isinstance(p, VersionChanged)]
    assert [(c.reason, c.actor, c.to_version) for c in changes] == [("operator", "ops", "v2")]


async def test_every_execution_records_its_version_and_pins(
    make_runtime: Make, store: Store
) -> None:
    outbox = Outbox()
    definition = assistant(outbox, "You are terse.")
    async with make_runtime({"assistant": definition}) as runtime:
        version = runtime.versions.newest("assistant")
        assert version is not None and version.pins is not None
        assert version.version == version_digest(version.pins)
        receipt = await runtime.dispatch("assistant", "acme", "hello")
        await pending_gate(runtime, store, receipt)
    [started] = [p for p in await records_of(store, receipt) if isinstance(p, ExecutionStarted)]
    assert started.version == version.version and started.pins == version.pins
    assert (await store.get_submission(receipt.submission_id)).version == version.version


async def test_a_default_version_is_a_digest_of_what_the_journal_pins() -> None:
    outbox = Outbox()
    env: dict[str, str] = {}

    async def name(definition: AgentDefinition) -> str:
        resolved = await AgentVersions.resolve({"a": [definition]}, env)
        newest = resolved.newest("a")
        assert newest is not None
        return newest.version

    same = await name(assistant(outbox, "You are terse."))
    assert same == await name(assistant(outbox, "You are terse."))
    assert same != await name(assistant(outbox, "You are verbose."))
    assert await name(assistant(outbox, "x", version="release-7")) == "release-7"

    def needs_a_tenant(instance: str, env: object) -> AgentSpec:
        raise LookupError(f"no tenant {instance!r}")

    by_code = await name(AgentDefinition(needs_a_tenant))
    assert len(by_code) == 12 and by_code == await name(AgentDefinition(needs_a_tenant))


def _unused(instance: str, env: Mapping[str, str]) -> AgentSpec:
    raise AssertionError("never initialized")


@pytest.mark.parametrize(
    ("agents", "problem"),
    [
        ({"a": {"v1": "nope"}}, "must be an AgentDefinition"),
        ({"a": {}}, "names no version"),
        ({"a": {"v1": AgentDefinition(_unused, version="v2")}}, "is named version 'v2'"),
        (
            {
                "a": AgentDefinition(
                    _unused, version="v1", previous=[AgentDefinition(_unused, version="v1")]
                )
            },
            "names a version twice",
        ),
    ],
)
def test_versions_given_wrongly_are_refused(agents: dict[str, Any], problem: str) -> None:
    with pytest.raises((TypeError, ValueError), match=problem):
        Runtime(agents, "memory://")


async def test_several_versions_are_served_newest_first(make_runtime: Make) -> None:
    outbox = Outbox()
    served = {"v1": assistant(outbox, "one"), "v2": assistant(outbox, "two", policy="upgrade")}
    async with make_runtime({"assistant": served}) as runtime:
        assert [v.version for v in runtime.versions.of("assistant")] == ["v2", "v1"]
        assert runtime.versions.serves() == {"assistant": ("v2", "v1", "*")}
        assert runtime.agents["assistant"].policy == "upgrade"


def _tool_results(request: ModelRequest) -> str:
    return " ".join(p.content for p in request.messages[-1].parts if isinstance(p, ToolResultPart))


def lead(version: str, **definition: Any) -> AgentDefinition:
    """A parent, ``assistant``: it asks ``researcher`` (a task), then answers
    ``"<version> lead: <what the child said>"``."""

    def reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return f"{version} lead: {_tool_results(request)}"
        return ToolUse("task", {"agent": "researcher", "prompt": "tides"})

    spec = agent_spec(ScriptedModel(reply), system_prompt=f"You lead, {version}.")
    return AgentDefinition(lambda instance, env: spec, version=version, **definition)


def gated_researcher(looked_up: list[str], version: str, **definition: Any) -> AgentDefinition:
    """A child, ``researcher``: it looks its topic up with a gated tool (each run of it
    listed in ``looked_up`` with the version that ran it), then answers
    ``"<version> found: <the result>"``."""

    @tool(requires_approval=True)
    def lookup(topic: str) -> str:
        """Look a topic up."""
        looked_up.append(version)
        return f"{topic} rise twice a day"

    def reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "user":
            return ToolUse("lookup", {"topic": request.messages[-1].text})
        return f"{version} found: {_tool_results(request)}"

    spec = agent_spec(
        ScriptedModel(reply), system_prompt=f"You research, {version}.", tools=[lookup]
    )
    return AgentDefinition(lambda instance, env: spec, version=version, **definition)


DELEGATES = {"assistant": ["researcher"]}


async def park_parent_and_child_on_v1(
    make_runtime: Make, store: CompleteStore, looked_up: list[str]
) -> tuple[Receipt, Submission, str]:
    """Under v1 of both agents: the parent waits for its child, the child for the approval
    of its lookup; then the server stops. The parent's receipt, the child and the approval."""
    agents = {"assistant": lead("v1"), "researcher": gated_researcher(looked_up, "v1")}
    async with make_runtime(agents, subagents=DELEGATES) as runtime:
        receipt = await runtime.dispatch("assistant", "acme", "research tides")
        [child] = await until_emitted(runtime, lambda: store.list_children(receipt.submission_id))
        await wait_for_status(runtime, child.id, SubmissionStatus.WAITING)
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        state = await (await Journal.open(store, child.conversation_id, fence=0)).inspect_approval()
        assert state is not None and state.approval_id is not None
    parent = await store.get_submission(receipt.submission_id)
    child = await store.get_submission(child.id)
    # Each run is stamped with its own agent's version at its own first claim.
    assert (parent.version, child.version) == ("v1", "v1")
    assert parent.wait_reason == WAIT_FOR_CHILDREN and child.wait_reason == "approval"
    return receipt, child, state.approval_id


async def test_a_parent_and_its_child_each_wait_for_their_own_version(
    make_runtime: Make, store: CompleteStore
) -> None:
    """Parent and child parked on v1; a deploy of v2 only (both agents ``pinned``). What we
    found: a child is a run of its own agent, stamped at its own first claim, so it follows
    its own version's rule and nothing of its parent's. Its approval decided under v2, it
    waits for a worker of researcher v1 (``no_worker_for_version``), the lookup not run; the
    parent keeps waiting for its child (a wait no worker is needed for). A server that runs
    v1 of both beside v2 finishes the child on v1, which wakes the parent, resumed on v1."""
    looked_up: list[str] = []
    receipt, child, approval_id = await park_parent_and_child_on_v1(make_runtime, store, looked_up)
    v2 = {"assistant": lead("v2"), "researcher": gated_researcher(looked_up, "v2")}
    async with make_runtime(v2, subagents=DELEGATES) as runtime:
        await runtime.approve(approval_id, "approve", approver="ann")
        info = await runtime.submission(child.id)
        assert info.submission.status is SubmissionStatus.QUEUED and info.waits_for_a_worker
        parent = await runtime.submission(receipt.submission_id)
        assert parent.submission.wait_reason == WAIT_FOR_CHILDREN
        assert not parent.waits_for_a_worker
    assert looked_up == []
    both = {
        "assistant": lead("v2", previous=[lead("v1")]),
        "researcher": gated_researcher(
            looked_up, "v2", previous=[gated_researcher(looked_up, "v1")]
        ),
    }
    async with make_runtime(both, subagents=DELEGATES) as runtime:
        settled = await settle(runtime, receipt.submission_id)
    assert settled == {
        "status": "succeeded",
        "result": "v1 lead: v1 found: tides rise twice a day",
    }
    assert looked_up == ["v1"]
    versions = [(await store.get_submission(s)).version for s in (receipt.submission_id, child.id)]
    assert versions == ["v1", "v1"]


async def test_a_child_under_upgrade_goes_on_while_its_pinned_parent_waits_for_v1(
    make_runtime: Make, store: CompleteStore
) -> None:
    """Parent and child parked on v1; a deploy of v2 only, the child's agent under
    ``upgrade``, the parent's ``pinned``. The child goes on with v2 (its log journals the
    change) and settles; its answer wakes the parent, which v2 alone may not run: it waits
    for a worker of assistant v1, its recorded task call and the child's answer kept. A
    server that runs assistant v1 beside v2 resumes it on v1, with the answer v2 gave."""
    looked_up: list[str] = []
    receipt, child, approval_id = await park_parent_and_child_on_v1(make_runtime, store, looked_up)
    v2 = {
        "assistant": lead("v2"),
        "researcher": gated_researcher(looked_up, "v2", policy="upgrade"),
    }
    async with make_runtime(v2, subagents=DELEGATES) as runtime:
        await runtime.approve(approval_id, "approve", approver="ann")
        assert (await settle(runtime, child.id))["result"] == "v2 found: tides rise twice a day"

        async def woken() -> SubmissionInfo | None:
            info = await runtime.submission(receipt.submission_id)
            return info if info.submission.status is SubmissionStatus.QUEUED else None

        parent = await until_emitted(runtime, woken)
        assert parent.waits_for_a_worker and parent.submission.version == "v1"
    assert looked_up == ["v2"]
    [changed] = [
        p
        for p in await records_of(store, Receipt(child.id, child.conversation_id, "default"))
        if isinstance(p, VersionChanged)
    ]
    assert (changed.from_version, changed.to_version) == ("v1", "v2")
    both = {"assistant": lead("v2", previous=[lead("v1")]), "researcher": v2["researcher"]}
    async with make_runtime(both, subagents=DELEGATES) as runtime:
        settled = await settle(runtime, receipt.submission_id)
    assert settled == {
        "status": "succeeded",
        "result": "v1 lead: v2 found: tides rise twice a day",
    }
    assert looked_up == ["v2"]
    assert not [p for p in await records_of(store, receipt) if isinstance(p, VersionChanged)]
