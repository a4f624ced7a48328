"""The subagent crash matrix (issue 21, item 11): a real worker process is SIGKILLed at each
boundary of a task call, then a fresh worker process on the same store finishes the work.

The boundaries, in the order a task call crosses them (``subagent_crash_worker.CUTS``):

- (a) ``intent``: the task call's ``tool_called`` is durable (with the model completion that
  rode with it), no child is admitted yet;
- (b) ``admitted``: the child's admission committed, the parent's ``task_spawned`` did not;
- (c) ``child-model`` / ``child-tool``: the parent is parked (waiting, no lease), the child is
  inside its model call (its intent durable) or inside its tool;
- (d) ``child-settled``: the child's settlement committed, and in the same commit the
  parent's wake (so it is queued, not waiting), before the parent's next claim;
  ``child-settling``: a child aborted mid-call settles in two phases, and the cut falls
  between its settled record and the finalize that wakes the parent;
- (e) ``delivered`` / ``answering``: the resumed parent appended ``tool_outcome`` and
  ``task_finished``, or is inside the model call that reads them;
- (f) ``parent-settled`` / ``cascade``: the parent's settlement committed and its
  bookkeeping did not run; in ``cascade`` it was aborted while parked, so its running child
  is left for reconciliation to cancel; ``cascade-settling`` cuts that aborted parent's
  two-phase settlement before its finalize: the reconciliation that finishes it cancels
  the child too.

The fan-out cases give the parent two task calls in one turn: the cut then falls after the
first child's admission, after the first child's settlement (the parent must go on waiting
for the second), or between the two deliveries.

Every cut ends the same way once the fresh worker is done: every submission settled, with one
``submission_settled`` record each; one child per task call (``list_children`` and the
``task_spawned`` records agree, no stray submission); one ``tool_outcome`` and one
``task_finished`` per call; and no model asked again for an input whose completion was
recorded (each model request is logged by the worker with its process id and input hash, and
compared with the ``model_called`` records the logs hold before and after the restart).

One pass per boundary per store runs in CI; ``TETHER_SOAK=1`` adds the variants marked
``slow`` and repeats the whole matrix (``TETHER_SUBAGENT_CRASH_ROUNDS``, 3 by default).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from tether.engine import CANCELLED_BY_PARENT
from tether.journal import UNKNOWN_OUTCOME, LogView
from tether.messages import Mediation, ToolOutcomeStatus
from tether.records import (
    AssistantMessageCompleted,
    ModelCalled,
    Payload,
    Record,
    SubmissionSettled,
    TaskFinished,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
)
from tether.store import SessionKey, Submission, SubmissionStatus, open_store
from tether.testing.storetest import CompleteStore, complete

from ..postgres import fresh_schema, store_url
from ..processes import kill, log_text, start

pytestmark = pytest.mark.process

WORKER = Path(__file__).with_name("subagent_crash_worker.py")
ROOT = Path(__file__).resolve().parents[2]
CUT_SECONDS = 50  # for the first worker to reach its cut and die (it gives up after 40)
RECOVER_SECONDS = 50  # for the fresh worker to settle everything and exit (likewise)
ONE = ("tides",)
TWO = ("tides", "reefs")
P = TypeVar("P", bound=Payload)


@dataclass(frozen=True)
class Case:
    cut: str
    topics: tuple[str, ...]

    @property
    def parent_aborted(self) -> bool:
        """The worker aborts the parent while it waits (its children are then cancelled)."""
        return self.cut in ("cascade", "cascade-settling")

    @property
    def child_aborted(self) -> bool:
        """The worker aborts the child mid-call (its parent gets an error result)."""
        return self.cut == "child-settling"

    def model_calls(self) -> int:
        """The model calls the logs end with: the parent's two (one if it was aborted while
        it waited), and each child's two (none for a child aborted or cancelled mid-call)."""
        children = 0 if self.parent_aborted or self.child_aborted else 2 * len(self.topics)
        return (1 if self.parent_aborted else 2) + children


SLOW = pytest.mark.slow
CASES = [
    pytest.param(Case("intent", ONE), id="a-spawn-intent"),
    pytest.param(Case("admitted", ONE), id="b-child-admitted"),
    pytest.param(Case("child-model", ONE), id="c-child-mid-model", marks=SLOW),
    pytest.param(Case("child-tool", ONE), id="c-child-mid-tool"),
    pytest.param(Case("child-settled", ONE), id="d-child-settled"),
    pytest.param(Case("child-settling", ONE), id="d-aborted-child-settling", marks=SLOW),
    pytest.param(Case("delivered", ONE), id="e-delivered"),
    pytest.param(Case("answering", ONE), id="e-answering", marks=SLOW),
    pytest.param(Case("parent-settled", ONE), id="f-parent-settled"),
    pytest.param(Case("cascade", ONE), id="f-cascade"),
    pytest.param(Case("cascade-settling", ONE), id="f-cascade-settling"),
    pytest.param(Case("admitted", TWO), id="fanout-admitted", marks=SLOW),
    pytest.param(Case("child-settled", TWO), id="fanout-child-settled"),
    pytest.param(Case("delivered", TWO), id="fanout-delivered", marks=SLOW),
]
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


# --- reading what a run left -------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    """The parent, its children and every log, as the store holds them."""

    root: Submission
    children: list[Submission]
    everything: list[Submission]
    logs: dict[str, list[Record]]

    @property
    def root_log(self) -> list[Record]:
        return self.logs[self.root.conversation_id]

    def log_of(self, submission: Submission) -> list[Record]:
        return self.logs[submission.conversation_id]

    def completions(self) -> list[str]:
        """The input hashes of every model call with a recorded (whole) completion."""
        return [h for log in self.logs.values() for h in _completed_inputs(log)]


async def read_tree(store: CompleteStore) -> Tree:
    conversation = await store.find_conversation(SessionKey("assistant", "acme", "default"))
    [root] = await store.list_submissions(conversation_id=conversation.id)
    everything = await store.list_submissions()
    logs = {
        s.conversation_id: await store.read(s.conversation_id, limit=100_000) for s in everything
    }
    return Tree(root, await store.list_children(root.id), everything, logs)


def of(records: list[Record], kind: type[P]) -> list[P]:
    return [r.payload for r in records if r.kind == kind.KIND and isinstance(r.payload, kind)]


def _completed_inputs(records: list[Record]) -> list[str]:
    answered = {c.call_id for c in of(records, AssistantMessageCompleted) if not c.interrupted}
    return [m.input_hash for m in of(records, ModelCalled) if m.call_id in answered]


def task_calls(records: list[Record]) -> list[ToolCalled]:
    return [c for c in of(records, ToolCalled) if c.mediation is Mediation.TASK]


def model_requests(calls: Path) -> list[tuple[int, str, str]]:
    """``(pid, agent, input hash)`` of every model request the workers made."""
    lines = calls.read_text().splitlines() if calls.exists() else []
    return [(int(pid), agent, digest) for pid, agent, digest in (ln.split() for ln in lines)]


# --- what each cut must have left behind ---------------------------------------------------


def assert_cut_landed(case: Case, tree: Tree, crash_requests: list[tuple[int, str, str]]) -> None:
    """The first worker died where its cut says, not somewhere near it."""
    root, log, children = tree.root, tree.root_log, tree.children
    where = f"cut {case.cut} with {len(case.topics)} task call(s)"
    unsettled = {SubmissionStatus.QUEUED, SubmissionStatus.RUNNING}
    if case.cut == "intent":
        assert root.status is SubmissionStatus.RUNNING, where
        assert len(task_calls(log)) == 1 and not of(log, TaskSpawned), where
        assert children == [], f"{where}: a child was admitted before the cut"
    elif case.cut == "admitted":
        assert root.status is SubmissionStatus.RUNNING, where
        assert len(children) == 1 and children[0].status in unsettled, where
        assert not of(log, TaskSpawned), f"{where}: task_spawned was written"
    elif case.cut in ("child-model", "child-tool"):
        assert root.status is SubmissionStatus.WAITING, f"{where}: the parent is {root.status}"
        assert root.lease_expires_at is None and root.owner_id is None, where
        [child] = children
        assert child.status is SubmissionStatus.RUNNING, where
        child_log = tree.log_of(child)
        if case.cut == "child-model":
            assert len(of(child_log, ModelCalled)) == 1, where
            assert not _completed_inputs(child_log), f"{where}: the call was answered"
        else:
            assert len(of(child_log, ToolCalled)) == 1 and not of(child_log, ToolOutcome), where
    elif case.cut == "child-settled":
        settled = [c for c in children if c.status is SubmissionStatus.SETTLED]
        # SQLite's writer commits the appends waiting together in one transaction: a
        # sibling's settlement may have committed with the first (seen on a loaded machine).
        assert 1 <= len(settled) <= len(case.topics), f"{where}: {len(settled)} children settled"
        assert not of(log, ToolOutcome), f"{where}: the parent already took the answer"
        if len(settled) == len(case.topics):
            # The last wake is in its settlement's commit: the parent no longer waits.
            assert root.status in unsettled, f"{where}: the parent is {root.status}"
        else:
            assert root.status is SubmissionStatus.WAITING, f"{where}: the parent is {root.status}"
    elif case.cut in ("delivered", "answering"):
        delivered = 1 if case.cut == "delivered" else len(case.topics)
        assert root.status is SubmissionStatus.RUNNING, where
        assert len(of(log, TaskFinished)) == delivered, where
        assert len(of(log, ToolOutcome)) == delivered, where
        assert not of(log, SubmissionSettled), where
        if case.cut == "answering":
            asked = [agent for _, agent, _ in crash_requests if agent == "assistant"]
            assert len(asked) == 2, f"{where}: the parent's model was asked {len(asked)} times"
    elif case.cut == "parent-settled":
        assert root.status is SubmissionStatus.SETTLED, where
        assert all(c.status is SubmissionStatus.SETTLED for c in children), where
    elif case.cut in ("cascade", "cascade-settling"):
        if case.cut == "cascade":
            assert root.status is SubmissionStatus.SETTLED, where
        else:  # its settlement reserved and its record written, not finalized
            assert root.status is SubmissionStatus.TERMINALIZING, where
        assert root.settlement is not None and root.settlement["status"] == "aborted", where
        assert len(of(log, SubmissionSettled)) == 1, where
        [child] = children
        assert child.status is not SubmissionStatus.SETTLED, where
        assert child.cancel_requested_at is None, f"{where}: the child's cancel already ran"
    elif case.cut == "child-settling":
        assert root.status is SubmissionStatus.WAITING, f"{where}: the parent is {root.status}"
        [child] = children
        assert child.status is SubmissionStatus.TERMINALIZING, where
        assert len(of(tree.log_of(child), SubmissionSettled)) == 1, where
    else:
        raise AssertionError(f"no expectations for cut {case.cut}")


# --- what every cut must end with --------------------------------------------------------


def assert_settled_once_each(tree: Tree) -> None:
    for submission in tree.everything:
        assert submission.status is SubmissionStatus.SETTLED, (
            f"{submission.id} ({submission.key.agent}) ended {submission.status}"
        )
        log = tree.log_of(submission)
        mine = [
            r for r in log if r.kind == SubmissionSettled.KIND and r.submission_id == submission.id
        ]
        assert len(mine) == 1, f"{submission.id} has {len(mine)} submission_settled records"
        LogView().extend(log)  # the executions are well formed


def assert_one_child_and_one_answer_per_call(case: Case, tree: Tree) -> None:
    log, root = tree.root_log, tree.root
    calls = [c.call_id for c in task_calls(log)]
    assert calls == [f"call-{i}" for i in range(len(case.topics))], f"task calls: {calls}"
    spawned = {s.call_id: s for s in of(log, TaskSpawned)}
    assert sorted(s.call_id for s in of(log, TaskSpawned)) == calls, "task_spawned per call"
    children = {c.id: c for c in tree.children}
    assert len(children) == len(tree.children) == len(calls), (
        f"{len(tree.children)} children for {len(calls)} task calls"
    )
    assert {s.child_submission_id for s in spawned.values()} == set(children), (
        "list_children and task_spawned disagree"
    )
    assert {s.id for s in tree.everything} == {root.id, *children}, "a stray submission"
    for call, task in spawned.items():
        child = children[task.child_submission_id]
        assert child.parent_submission_id == root.id and child.parent_call_id == call
        assert child.conversation_id == task.child_conversation_id
    # An aborted parent takes no child's answer, but its settlement closes each call with a
    # result saying so: the session's next turn must hand its model a whole history.
    answers = 0 if case.parent_aborted else 1
    outcomes = Counter(o.call_id for o in of(log, ToolOutcome))
    finished = Counter(f.call_id for f in of(log, TaskFinished))
    assert outcomes == Counter(dict.fromkeys(calls, 1)), f"tool_outcome per call: {dict(outcomes)}"
    expected = Counter(dict.fromkeys(calls, answers))  # a zero count equals a missing one
    assert finished == expected, f"task_finished per call: {dict(finished)}"
    if case.parent_aborted:
        for outcome in of(log, ToolOutcome):
            assert outcome.status is ToolOutcomeStatus.UNKNOWN and "aborted" in outcome.content


def assert_answers(case: Case, tree: Tree) -> None:
    root = tree.root
    assert root.settlement is not None
    by_call = {s.call_id: s.child_submission_id for s in of(tree.root_log, TaskSpawned)}
    children = {c.id: c for c in tree.children}
    ordered = [children[by_call[f"call-{i}"]] for i in range(len(case.topics))]
    if case.parent_aborted:
        assert root.settlement["status"] == "aborted", root.settlement
        for child in ordered:
            assert child.settlement is not None
            assert child.settlement.get("errorCode") == CANCELLED_BY_PARENT, (
                f"the child of a settled parent ended {dict(child.settlement)}"
            )
        return
    for task in of(tree.root_log, TaskFinished):
        child = children[task.child_submission_id]
        assert child.settlement is not None
        assert (task.status, task.error_code) == (
            child.settlement["status"],
            child.settlement.get("errorCode"),
        )
    if case.child_aborted:
        [child] = ordered
        assert child.settlement is not None and child.settlement["errorCode"] == "aborted"
        assert root.settlement["status"] == "succeeded", root.settlement
        assert str(root.settlement["result"]).startswith(
            "Findings: The researcher task failed (aborted)"
        ), root.settlement
        return
    results = []
    for topic, child in zip(case.topics, ordered, strict=True):
        assert child.settlement is not None and child.settlement["status"] == "succeeded", (
            child.settlement
        )
        result = child.settlement["result"]
        # A lookup cut mid-way is not idempotent: the child's model sees an unknown outcome.
        found = UNKNOWN_OUTCOME if case.cut == "child-tool" else f"{topic} data"
        # Cut at the first of two children's settlement, the other may be in its lookup
        # (between its call and its outcome, on a slow machine): that one's is unknown too.
        sibling_cut_mid_tool = len(case.topics) > 1 and case.cut == "child-settled"
        assert result == f"notes on {topic}: {found}" or (
            sibling_cut_mid_tool and result == f"notes on {topic}: {UNKNOWN_OUTCOME}"
        ), result
        results.append(result)
    if len(case.topics) > 1 and case.cut == "child-settled":  # the one whose settlement cut
        assert any(r.endswith(" data") for r in results), results
    for task in of(tree.root_log, TaskFinished):
        assert task.result == results[int(task.call_id.removeprefix("call-"))]
    assert root.settlement == {"status": "succeeded", "result": "Findings: " + " | ".join(results)}


def assert_no_recorded_model_call_repeated(
    case: Case,
    before: Tree,
    after: Tree,
    requests: list[tuple[int, str, str]],
    crash_pid: int,
    recovery_pid: int,
) -> None:
    recorded_before = set(before.completions())
    completed = after.completions()
    twice = [h for h, n in Counter(completed).items() if n > 1]
    assert not twice, f"a model input was answered and recorded twice: {twice}"
    expected = case.model_calls()
    assert len(completed) == expected, f"{len(completed)} model calls recorded, not {expected}"
    asked = {h for _, _, h in requests}
    assert set(completed) <= asked, "the model log misses calls the store recorded"
    by_crash = [h for pid, _, h in requests if pid == crash_pid]
    by_recovery = [h for pid, _, h in requests if pid == recovery_pid]
    assert len(by_crash) == len(set(by_crash)), "the first worker asked an input twice"
    assert len(by_recovery) == len(set(by_recovery)), "the fresh worker asked an input twice"
    again = sorted(set(by_recovery) & recorded_before)
    assert not again, f"the fresh worker asked again for recorded completions: {again}"
    assert set(by_recovery) == set(completed) - recorded_before, (
        "the fresh worker asked for something else than what was left to answer"
    )


# --- the matrix --------------------------------------------------------------------------


def _start(
    directory: Path, url: str, cut: str, topics: str, calls: Path
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (directory / f"worker-{cut}.log").open("ab") as log:
        return start(
            [sys.executable, str(WORKER), url, cut, topics, str(calls)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )


async def _exited(process: subprocess.Popen[bytes], seconds: float, log: Path) -> int:
    try:
        code: int = await asyncio.to_thread(process.wait, seconds)
    except subprocess.TimeoutExpired:
        kill(process)
        raise AssertionError(
            f"the worker did not exit within {seconds} s:\n{log_text(log)}"
        ) from None
    return code


async def run_case(directory: Path, url: str, case: Case) -> None:
    calls = directory / "model-calls.log"
    crash = _start(directory, url, case.cut, ",".join(case.topics), calls)
    # The fresh worker starts now, so that its imports overlap the first one's run; it opens
    # the store only when told to go, once the first one is dead.
    recovery = _start(directory, url, "recover", "-", calls)
    try:
        crash_log = directory / f"worker-{case.cut}.log"
        code = await _exited(crash, CUT_SECONDS, crash_log)
        assert code == -9, f"the worker exited with {code}, not SIGKILL:\n{log_text(crash_log)}"
        store = complete(await open_store(url))
        try:
            before = await read_tree(store)
            crash_requests = [r for r in model_requests(calls) if r[0] == crash.pid]
            assert_cut_landed(case, before, crash_requests)

            assert recovery.stdin is not None
            recovery.stdin.write(b"go\n")  # the first worker is dead: over to the fresh one
            recovery.stdin.close()
            recovery_log = directory / "worker-recover.log"
            code = await _exited(recovery, RECOVER_SECONDS, recovery_log)
            assert code == 0, f"the fresh worker exited with {code}:\n{log_text(recovery_log)}"

            after = await read_tree(store)
            assert_settled_once_each(after)
            assert_one_child_and_one_answer_per_call(case, after)
            assert_answers(case, after)
            assert_no_recorded_model_call_repeated(
                case, before, after, model_requests(calls), crash.pid, recovery.pid
            )
            for conversation_id, log in after.logs.items():
                assert await store.verify(conversation_id) == len(log)
        finally:
            await store.close()
    finally:
        kill(crash)
        kill(recovery)


def _rounds() -> int:
    return int(os.environ.get("TETHER_SUBAGENT_CRASH_ROUNDS", "3"))


def _url(directory: Path, backend: str) -> str:
    if backend == "sqlite":
        (directory / "store").mkdir()
        return f"sqlite:///{directory / 'store'}"
    return store_url(fresh_schema())


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_worker_killed_at_a_task_boundary_recovers_every_submission_once(
    tmp_path: Path, backend: str, case: Case
) -> None:
    await run_case(tmp_path, _url(tmp_path, backend), case)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_crash_matrix_soak(tmp_path: Path, backend: str, case: Case) -> None:
    """The matrix again, ``TETHER_SUBAGENT_CRASH_ROUNDS`` times per boundary: a cut that
    lands in a commit shared with other work (SQLite's group commit, a claim racing a wake)
    gets more chances to show."""
    for round_ in range(_rounds()):
        directory = tmp_path / f"round-{round_}"
        directory.mkdir()
        await run_case(directory, _url(directory, backend), case)
