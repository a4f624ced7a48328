"""End to end: the built-in agent on the workspace tools, through a real ``Runtime`` on a
memory store. Every call is journaled with its recovery class; a replay runs no tool; a
resume serves what was recorded, re-drives an idempotent tool whose intent was cut, and
gives an unknown outcome (never a re-run) to a ``bash`` command whose result was lost."""

from collections.abc import Callable
from pathlib import Path

from tether.agent import Agent, Tool, Toolbox
from tether.engine import AgentDefinition, AgentSpec, EngineEvent, Runtime, ToolProgress
from tether.journal import UNKNOWN_OUTCOME, Journal, ToolScope
from tether.messages import Mediation, ModelRequest, ToolCall, ToolResult
from tether.models import ScriptedModel, ToolUse
from tether.records import StepRecorded, ToolCalled, ToolOutcome
from tether.store import MemoryStore
from tether.testing import copy_prefix
from tether.tools import workspace

from ..engine.conftest import FAST
from ..engine.test_approvals import pending_gate
from ..engine.test_runtime import settle

PLAN = [
    ToolUse("write", {"path": "notes.txt", "content": "alpha\nbeta\n"}, "c1"),
    ToolUse("read", {"path": "notes.txt"}, "c2"),
    ToolUse("edit", {"path": "notes.txt", "old_string": "beta", "new_string": "gamma"}, "c3"),
    ToolUse("grep", {"pattern": "gamma"}, "c4"),
    ToolUse("bash", {"command": "echo ran >> bash.log; cat notes.txt"}, "c5"),
]


def script(request: ModelRequest) -> ToolUse | str:
    """One tool call after another, then an answer made of what they returned."""
    results = [m.parts[0] for m in request.messages if m.role == "tool"]
    if len(results) < len(PLAN):
        return PLAN[len(results)]
    return " | ".join(getattr(part, "content", "") for part in results)


class Counting:
    """The agent's tool executor, counting the tools it actually runs."""

    def __init__(self, tools: tuple[Tool, ...]) -> None:
        self.box = Toolbox(tools)
        self.calls: list[str] = []

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        self.calls.append(call.name)
        return await self.box.execute(call, scope)


async def _resume(
    store: MemoryStore,
    conversation_id: str,
    tools: tuple[Tool, ...],
    cut: tuple[str, str],
    model: Callable[[ModelRequest], ToolUse | str] = script,
) -> tuple[object, list[str], MemoryStore]:
    """A crash right after the record of kind ``cut[0]`` for call ``cut[1]``, resumed."""
    records = await store.read(conversation_id)
    seq = next(
        r.seq for r in records if r.kind == cut[0] and getattr(r.payload, "call_id", None) == cut[1]
    )
    crashed = MemoryStore()
    await copy_prefix(store, conversation_id, seq, crashed)
    counting = Counting(tools)
    journal = await Journal.open(
        crashed, conversation_id, model=ScriptedModel(model), tools=counting
    )
    resumed = await journal.resume(Agent(tools=tools))
    return resumed.output, counting.calls, crashed


async def test_a_coding_session_is_journaled_replayed_and_resumed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    tools = workspace(root, bash_timeout=30)
    counting = Counting(tools)
    spec = AgentSpec(harness=Agent(tools=tools), model=ScriptedModel(script), tools=counting)
    progress: list[str] = []

    async def observe(event: EngineEvent) -> None:
        if isinstance(event, ToolProgress):
            progress.append(event.text)

    store = MemoryStore()
    agents = {"coder": AgentDefinition(lambda instance, env: spec)}
    async with Runtime(agents, store, observers=[observe], **FAST) as runtime:
        receipt = await runtime.dispatch("coder", "acme", "tidy the notes")
        outcome = await settle(runtime, receipt.submission_id)
    answer = outcome["result"]
    assert outcome["status"] == "succeeded" and isinstance(answer, str)
    assert answer.split(" | ") == [
        "wrote 11 bytes to notes.txt",
        "alpha\nbeta\n",
        "replaced 1 occurrence(s) of old_string in notes.txt",
        "notes.txt:2:gamma",
        "alpha\ngamma\n[exit code 0]",
    ]
    assert counting.calls == ["write", "read", "edit", "grep", "bash"]
    assert (root / "notes.txt").read_text() == "alpha\ngamma\n"
    assert (root / "bash.log").read_text() == "ran\n"
    assert "".join(progress) == "alpha\ngamma\n"  # bash's output, streamed as it ran

    # Journaled: each call's intent with its recovery class, the edit's plan, each outcome.
    cid = receipt.conversation_id
    records = await store.read(cid)
    intents = [r.payload for r in records if isinstance(r.payload, ToolCalled)]
    assert [(i.tool, bool(i.idempotent), i.mediation) for i in intents] == [  # False: unset
        ("write", True, Mediation.HOST),
        ("read", True, Mediation.HOST),
        ("edit", True, Mediation.HOST),
        ("grep", True, Mediation.HOST),
        ("bash", False, Mediation.HOST),
    ]
    [plan] = [r.payload for r in records if isinstance(r.payload, StepRecorded)]
    assert plan.call_id == "c3" and plan.name == "edit"
    assert isinstance(plan.value, dict) and set(plan.value) == {
        "path",
        "before",
        "after",
        "replacements",
    }
    outcomes = [r.payload for r in records if isinstance(r.payload, ToolOutcome)]
    assert [o.call_id for o in outcomes] == ["c1", "c2", "c3", "c4", "c5"]

    # A replay runs no tool (and no model), and gets the same answer.
    replaying = Counting(tools)
    journal = await Journal.open(store, cid, fence=0, tools=replaying)
    assert await journal.replay(Agent(tools=tools)) == [answer]
    assert replaying.calls == [] and (root / "bash.log").read_text() == "ran\n"

    # Cut after bash's intent: its outcome is unknown; it is not run again.
    output, calls, crashed = await _resume(store, cid, tools, ("tool_called", "c5"))
    assert calls == [] and (root / "bash.log").read_text() == "ran\n"
    assert isinstance(output, str) and output.endswith(" | " + UNKNOWN_OUTCOME)
    [lost] = [
        r.payload
        for r in await crashed.read(cid)
        if isinstance(r.payload, ToolOutcome) and r.payload.call_id == "c5"
    ]
    assert lost.status == "unknown"

    # Cut after the edit's plan, the file already edited: the edit is re-driven, finds the
    # file in its planned after-state and leaves it (same inode: not rewritten); the
    # write and the read before it are served, not run.
    inode = (root / "notes.txt").stat().st_ino
    output, calls, _ = await _resume(store, cid, tools, ("step_recorded", "c3"))
    assert calls == ["edit", "grep", "bash"] and output == answer
    assert (root / "notes.txt").stat().st_ino == inode
    assert (root / "bash.log").read_text() == "ran\nran\n"  # bash had not run in that past

    # Cut after grep's intent: grep (idempotent) is re-driven; nothing before it runs.
    output, calls, _ = await _resume(store, cid, tools, ("tool_called", "c4"))
    assert calls == ["grep", "bash"] and output == answer


def gated_script(request: ModelRequest) -> ToolUse | str:
    results = [m.parts[0] for m in request.messages if m.role == "tool"]
    if not results:
        return ToolUse("bash", {"command": "echo ran >> bash.log; echo done"}, "b1")
    return getattr(results[0], "content", "")


async def test_an_approved_command_cut_short_is_not_run_again(tmp_path: Path) -> None:
    """With ``bash_approval``, the journal marks the approved command's run before it starts:
    a recovery that finds the mark closes it as unknown rather than run it a second time."""
    root = tmp_path / "ws"
    root.mkdir()
    tools = workspace(root, bash_approval=True)
    spec = AgentSpec(
        harness=Agent(tools=tools), model=ScriptedModel(gated_script), tools=Counting(tools)
    )
    store = MemoryStore()
    agents = {"coder": AgentDefinition(lambda instance, env: spec)}
    async with Runtime(agents, store, **FAST) as runtime:
        receipt = await runtime.dispatch("coder", "acme", "run it")
        approval_id = await pending_gate(runtime, store, receipt)
        assert not (root / "bash.log").exists()  # nothing runs before the decision
        await runtime.approve(approval_id, "approve", approver="ann")
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["result"] == "done\n[exit code 0]"
    assert (root / "bash.log").read_text() == "ran\n"
    cid = receipt.conversation_id
    kinds = [r.kind for r in await store.read(cid)]
    start = kinds.index("approval_decided")
    assert kinds[start : start + 3] == ["approval_decided", "step_recorded", "tool_outcome"]

    # Cut after the start mark: the command may have run; it is not run again.
    output, calls, _ = await _resume(store, cid, tools, ("step_recorded", "b1"), gated_script)
    assert calls == [] and output == UNKNOWN_OUTCOME
    assert (root / "bash.log").read_text() == "ran\n"

    # Cut after the decision, before the start: the approved command runs, once.
    output, calls, _ = await _resume(store, cid, tools, ("approval_decided", "b1"), gated_script)
    assert calls == ["bash"] and output == "done\n[exit code 0]"
    assert (root / "bash.log").read_text() == "ran\nran\n"
