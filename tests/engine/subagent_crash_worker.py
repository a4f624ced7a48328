"""A worker process for the subagent crash matrix: it runs a delegating parent and its
children, and SIGKILLs itself at one boundary of a task call.

    python subagent_crash_worker.py STORE_URL CUT TOPICS MODEL_CALLS_FILE
    python subagent_crash_worker.py STORE_URL recover - MODEL_CALLS_FILE < go

The parent (``assistant``) is asked to research TOPICS (comma-separated): its model calls
``task`` once per topic, in one turn, then answers with what the children found. A child
(``researcher``) calls its ``lookup`` tool once, then answers. CUT is where the process
kills itself (see :data:`CUTS`); ``recover`` runs a fresh worker on the same store, wraps
nothing, dispatches nothing, and exits 0 once no submission is left unsettled; it opens the
store only once a line (or the end) comes on its stdin, so that a test can start it (and
have it import everything) while the process it recovers from still runs.

Every model request appends ``<pid> <agent> <input hash>`` to MODEL_CALLS_FILE, so the test
can tell which process asked which model input, against what the logs recorded.

Until it dies, the worker keeps its own work in a fixed order, so that each cut finds the
state it is named for: a child answers only once its parent is parked, and with several
topics a later child answers only once an earlier one has settled.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path

from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.messages import Mediation, ModelRequest, ModelResponse, ToolResultPart
from tether.models import DeltaSink, ScriptedModel, ToolUse
from tether.records import (
    ModelCalled,
    Record,
    RecordDraft,
    SubmissionSettled,
    TaskFinished,
    ToolCalled,
)
from tether.store import (
    Admission,
    ClaimSettlement,
    NewSubmission,
    Submission,
    SubmissionStatus,
    open_store,
)
from tether.testing.storetest import CompleteStore, complete

CUTS = {
    "intent": "the task call's intent (tool_called) is durable; no child is admitted",
    "admitted": "the (first) child's admission committed; no task_spawned yet",
    "child-model": "the parent is parked; the child is inside its first model call",
    "child-tool": "the parent is parked; the child is inside its lookup tool",
    "child-settled": "the (first) child's settlement committed (and with it any wake)",
    "child-settling": "the child, aborted mid-call, wrote its settled record; not finalized",
    "delivered": "the parent resumed and appended the (first) tool_outcome and task_finished",
    "answering": "every answer is delivered; the parent is inside its next model call",
    "parent-settled": "the parent's settlement committed; its bookkeeping has not run",
    "cascade": "the parent, aborted while parked, has settled; its child is not cancelled",
    "cascade-settling": "the parent, aborted while parked, wrote its settled record only",
}
BOUND = 20.0
"""How long one wait inside the worker may take before it gives up (exit code 3, with the
reason on stderr); the run as a whole gets twice that, below the test's own bounds."""


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def give_up(why: str) -> None:
    print(f"subagent_crash_worker: {why}", file=sys.stderr, flush=True)
    os._exit(3)


def _log_call(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _tool_results(request: ModelRequest) -> list[str]:
    results: list[str] = []
    for message in reversed(request.messages):
        if message.role != "tool":
            break
        results[:0] = [p.content for p in message.parts if isinstance(p, ToolResultPart)]
    return results


def _prompt(request: ModelRequest) -> str:
    return next(m.text for m in request.messages if m.role == "user")


class AuditedModel(ScriptedModel):
    """A scripted model that logs every request, and runs ``hook`` before it answers."""

    def __init__(
        self,
        agent: str,
        script: Callable[[ModelRequest], object],
        calls: Path,
        hook: Callable[[ModelRequest], Awaitable[None]],
    ) -> None:
        super().__init__(script)
        self.agent, self.calls_path, self.hook = agent, calls, hook

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        _log_call(self.calls_path, f"{os.getpid()} {self.agent} {request.input_hash()}")
        await self.hook(request)
        return await super().request(request, stream)


def parent_reply(request: ModelRequest) -> object:
    if request.messages[-1].role == "tool":
        return "Findings: " + " | ".join(_tool_results(request))
    topics = _prompt(request).removeprefix("research: ").split(",")
    return [
        ToolUse("task", {"agent": "researcher", "prompt": topic}, call_id=f"call-{i}")
        for i, topic in enumerate(topics)
    ]


def child_reply(request: ModelRequest) -> object:
    if request.messages[-1].role == "tool":
        return f"notes on {_prompt(request)}: " + " | ".join(_tool_results(request))
    return ToolUse("lookup", {"topic": _prompt(request)}, call_id="look")


class Crash:
    """The cut this process dies at, and the waits that order its work until then."""

    def __init__(self, store: CompleteStore, cut: str | None, topics: list[str]) -> None:
        self.store, self.cut, self.topics = store, cut, topics
        self.root_id: str | None = None
        self.dispatched = asyncio.Event()
        self.runtime: Runtime | None = None

    async def _until(self, what: str, check: Callable[[], Awaitable[bool]]) -> None:
        try:
            async with asyncio.timeout(BOUND):
                while not await check():  # noqa: ASYNC110 - polling the store, shared with other processes
                    await asyncio.sleep(0.02)
        except TimeoutError:
            give_up(f"cut {self.cut}: {what} did not happen within {BOUND:g} s")

    async def root(self) -> str:
        await self._until("the dispatch", self._dispatched)
        assert self.root_id is not None
        return self.root_id

    async def _dispatched(self) -> bool:
        return self.dispatched.is_set()

    async def parked(self) -> None:
        root = await self.root()

        async def waiting() -> bool:
            parent = await self.store.get_submission(root)
            return parent.status is SubmissionStatus.WAITING

        await self._until("the parent's park", waiting)

    async def earlier_child_settled(self, topic: str) -> None:
        if topic == self.topics[0]:
            return
        root = await self.root()

        async def settled() -> bool:
            children = await self.store.list_children(root)
            return any(c.status is SubmissionStatus.SETTLED for c in children)

        await self._until("an earlier child's settlement", settled)

    async def intent_durable(self) -> None:
        """Until the child's model call (held behind while it is slow) is in its log."""
        root = await self.root()

        async def written() -> bool:
            for child in await self.store.list_children(root):
                records = await self.store.read(child.conversation_id)
                if any(isinstance(r.payload, ModelCalled) for r in records):
                    return True
            return False

        await self._until("the child's model_called record", written)

    # --- the hooks --------------------------------------------------------------------

    async def parent_model(self, request: ModelRequest) -> None:
        if self.cut == "answering" and request.messages[-1].role == "tool":
            die()

    async def child_model(self, request: ModelRequest) -> None:
        if self.cut is None:
            return
        topic = _prompt(request)
        if request.messages[-1].role == "tool":  # its answer
            await self.parked()
            await self.earlier_child_settled(topic)
            return
        if self.cut == "child-model":
            await self.parked()
            await self.intent_durable()
            die()
        if self.cut in ("cascade", "cascade-settling", "child-settling"):
            await self.parked()
            assert self.runtime is not None
            root = await self.root()
            [child] = await self.store.list_children(root)
            aborted = child.id if self.cut == "child-settling" else root
            await self.runtime.abort_submission(aborted)  # the child's own abort cancels this
            await asyncio.sleep(2 * BOUND)  # mid-call until the process dies
            give_up(f"cut {self.cut}: the settlement never came")

    async def child_tool(self) -> None:
        if self.cut == "child-tool":
            await self.parked()
            die()

    # --- the store's side -------------------------------------------------------------

    def wrap(self, store: CompleteStore) -> None:
        real_admit, real_append = store.admit, store.append
        real_settled, real_finalize = store.append_settled, store.finalize_settlement
        cut = self.cut

        async def admit(new: NewSubmission) -> Admission:
            admission = await real_admit(new)
            if cut == "admitted" and new.parent is not None:
                die()
            return admission

        async def append(
            conversation_id: str, drafts: Sequence[RecordDraft], *, expected_seq: int, fence: int
        ) -> list[Record]:
            records = await real_append(
                conversation_id, drafts, expected_seq=expected_seq, fence=fence
            )
            payloads = [d.payload for d in drafts]
            if cut == "intent" and any(
                isinstance(p, ToolCalled) and p.mediation is Mediation.TASK for p in payloads
            ):
                die()
            if cut == "delivered" and any(isinstance(p, TaskFinished) for p in payloads):
                die()
            settling = {d.submission_id for d in drafts if isinstance(d.payload, SubmissionSettled)}
            if (cut == "cascade-settling" and self.root_id in settling) or (
                cut == "child-settling" and settling - {self.root_id}
            ):
                die()
            return records

        async def append_settled(
            conversation_id: str,
            drafts: Sequence[RecordDraft],
            *,
            expected_seq: int,
            fence: int,
            settle: ClaimSettlement,
        ) -> list[Record]:
            records = await real_settled(
                conversation_id, drafts, expected_seq=expected_seq, fence=fence, settle=settle
            )
            is_root = settle.submission_id == self.root_id
            if (cut == "child-settled" and not is_root) or (cut == "parent-settled" and is_root):
                die()
            return records

        async def finalize_settlement(submission_id: str, *, now: datetime) -> Submission:
            submission = await real_finalize(submission_id, now=now)
            if cut == "cascade" and submission_id == self.root_id:
                die()
            return submission

        store.admit = admit  # type: ignore[method-assign]
        store.append = append  # type: ignore[method-assign]
        store.append_settled = append_settled  # type: ignore[method-assign]
        store.finalize_settlement = finalize_settlement  # type: ignore[method-assign]


def agents(crash: Crash, calls: Path) -> dict[str, AgentDefinition]:
    @tool
    async def lookup(topic: str) -> str:
        """Look a topic up."""
        await crash.child_tool()
        return f"{topic} data"

    parent = agent_spec(AuditedModel("assistant", parent_reply, calls, crash.parent_model))
    child = agent_spec(
        AuditedModel("researcher", child_reply, calls, crash.child_model), tools=[lookup]
    )
    return {
        "assistant": AgentDefinition(lambda instance, env: parent, max_attempts=100),
        "researcher": AgentDefinition(
            lambda instance, env: child, description="answers lookups", max_attempts=100
        ),
    }


async def main(url: str, cut: str, topics: list[str], calls: Path) -> None:
    if cut == "recover":
        await asyncio.to_thread(sys.stdin.readline)  # the go-ahead: the cut process is dead
    store = complete(await open_store(url))
    crash = Crash(store, None if cut == "recover" else cut, topics)
    if crash.cut is not None:
        if crash.cut not in CUTS:
            give_up(f"unknown cut {crash.cut!r}; the cuts are {', '.join(CUTS)}")
        crash.wrap(store)
    runtime = Runtime(
        agents(crash, calls),
        store,
        subagents={"assistant": ["researcher"]},
        claim_interval=0.05,
        lease=2.0,
        timeout_grace=0.5,
        backoff_cap=0.05,
    )
    crash.runtime = runtime
    async with runtime:
        if crash.cut is None:
            try:
                async with asyncio.timeout(2 * BOUND):
                    while await store.list_submissions(unsettled=True):  # noqa: ASYNC110 - polling the store
                        await asyncio.sleep(0.05)
            except TimeoutError:
                left = await store.list_submissions(unsettled=True)
                give_up(f"recovery left {[(s.id, s.status.value) for s in left]} unsettled")
        else:
            receipt = await runtime.dispatch("assistant", "acme", "research: " + ",".join(topics))
            crash.root_id = receipt.submission_id
            crash.dispatched.set()
            try:
                async with asyncio.timeout(2 * BOUND):
                    await runtime.wait(receipt.submission_id)
            except TimeoutError:
                give_up(f"cut {crash.cut}: not reached within {2 * BOUND:g} s")
            give_up(f"cut {crash.cut}: the parent settled without the process dying")
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3].split(","), Path(sys.argv[4])))
