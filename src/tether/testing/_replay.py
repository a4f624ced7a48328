"""Recorded sessions as regression tests: a log ``tether export`` wrote, replayed against
today's code with zero model and tool calls, and the first place it diverges.

The log is imported into a :class:`~tether.store.MemoryStore` (its chain verified first),
the agent it names is built from the definitions given (``initialize(instance, env)``, as a
claim would), and :meth:`Journal.replay <tether.journal.Journal.replay>` serves every
recorded effect back to its harness. The journal has no model and no tools: a harness that
asks for anything the log does not hold diverges, it is never answered live.

Example::

    from myapp import agents  # {name: AgentDefinition}, or a function returning them
    from tether.testing import assert_replays

    def test_the_refund_session_still_replays() -> None:
        assert_replays("tests/sessions/refund.jsonl", agents)
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
from pydantic import JsonValue

from tether.errors import HarnessMismatch, ReplayDiverged
from tether.journal import NOT_MINTED, Harness, Journal, transcript
from tether.messages import Message, ModelRequest, TextPart, ToolCallPart, ToolResultPart
from tether.records import (
    ExecutionEnded,
    ExecutionStarted,
    Record,
)
from tether.store import Conversation, LogWalk, MemoryStore

__all__ = ("ReplayDivergence", "ReplayReport", "assert_replays", "read_log", "replay_log")


class _Definition(Protocol):
    """What the replay needs of an agent definition (``tether.AgentDefinition`` is one)."""

    @property
    def initialize(self) -> Callable[[str, Mapping[str, str]], Any]: ...


Agents = Mapping[str, _Definition] | Callable[[], Mapping[str, _Definition]]
"""Agent definitions by name, or a function returning them (as ``--app`` takes)."""


@dataclass(frozen=True)
class ReplayDivergence:
    """Where today's code and the log part: the record at ``seq``, what the log holds there
    (``expected``: ``{"kind": ..., "payload": ...}``) and what the code asked for (``got``,
    the same shape). ``request`` is the model request the code made, for a model call (the
    log keeps only its hash); ``lines`` explain it all, readably."""

    seq: int | None
    execution_id: str | None
    message: str
    expected: dict[str, Any] | None
    got: dict[str, Any] | None
    request: ModelRequest | None
    lines: tuple[str, ...]


@dataclass(frozen=True)
class ReplayReport:
    """How a recorded log replayed: ``identical``, or its first ``divergence``.

    ``str(report)`` is the report ``tether replay --from`` prints."""

    conversation_id: str
    agent: str
    executions: int
    """The completed executions the log holds (the ones a replay runs)."""
    replayed: int
    """How many of them replayed identically (all of them when ``identical``)."""
    outputs: list[JsonValue] = field(default_factory=list)
    divergence: ReplayDivergence | None = None

    @property
    def identical(self) -> bool:
        return self.divergence is None

    def __str__(self) -> str:
        if self.divergence is None and self.executions == 0:
            return (
                f"nothing to replay: conversation {self.conversation_id} (agent {self.agent}) "
                "holds no completed execution"
            )
        if self.divergence is None:
            executions = "execution" if self.replayed == 1 else "executions"
            return (
                f"identical: {self.replayed} {executions} of conversation {self.conversation_id} "
                f"(agent {self.agent}) replayed; model and tool invocations: 0"
            )
        return "\n".join(self.divergence.lines)


def read_log(lines: Iterable[bytes | str]) -> tuple[Conversation, list[Record]]:
    """The conversation and records of an exported log (one record's JSON a line, then the
    export's trailer), its chain verified: ``RecordDecodeError`` naming the line (and seq)
    of a record that does not decode, ``LogTampered`` naming the seq where the chain
    breaks, ``ExportRefused`` if the trailer does not describe the records. A log without a
    trailer (recorded before exports had one) is read too."""
    walk = LogWalk()
    records = list(walk.records(lines, require_trailer=False))
    return walk.conversation(), records


def _conversation_of(records: Sequence[Record]) -> Conversation:
    """The conversation of a log given as records (verified by the walk)."""
    walk = LogWalk()
    for record in records:
        walk.take(record)
    return walk.conversation()


async def replay_log(
    log: str | os.PathLike[str] | Sequence[Record],
    agents: Agents,
    *,
    env: Mapping[str, str] | None = None,
) -> ReplayReport:
    """Replay ``log`` (a file ``tether export`` wrote, or its records) against ``agents``:
    the agent its ``conversation_created`` names, built by ``initialize(instance, env)``.
    Zero model and tool calls; a divergence is reported, not raised (a log that does not
    verify raises, see :func:`read_log`).

    Example::

        report = await replay_log("tests/sessions/refund.jsonl", agents)
        assert report.identical, report
    """
    if isinstance(log, str | os.PathLike):
        conversation, records = read_log(
            (await asyncio.to_thread(Path(log).read_bytes)).splitlines()
        )
    else:
        records = list(log)
        conversation = _conversation_of(records)
    definitions = agents() if callable(agents) else agents
    harness = await _build_harness(conversation, definitions, env or {})
    completed = _completed_executions(records)
    store = MemoryStore()
    try:
        await store.import_conversation(conversation, records)
        journal = await Journal.open(store, conversation.id, fence=NOT_MINTED)  # no model, no tools
        divergence: ReplayDivergence | None = None
        try:
            outputs = await journal.replay(harness)
        except ReplayDiverged as exc:
            divergence = _explain(exc, records, completed)
        except HarnessMismatch as exc:
            divergence = _harness_mismatch(exc, harness, completed)
    finally:
        await store.close()
    agent = conversation.key.agent
    if divergence is None:
        return ReplayReport(conversation.id, agent, len(completed), len(outputs), outputs)
    replayed = _index(completed, divergence.execution_id)
    return ReplayReport(conversation.id, agent, len(completed), replayed, divergence=divergence)


def assert_replays(
    log: str | os.PathLike[str] | Sequence[Record],
    agents: Agents,
    *,
    env: Mapping[str, str] | None = None,
) -> ReplayReport:
    """Replay ``log`` (see :func:`replay_log`) and fail the test with the divergence report
    (an ``AssertionError``) unless today's code asks for exactly what the log recorded. A
    log with no completed execution fails it too: a test of nothing is a mistake.

    It runs its own event loop: in an ``async`` test, ``await replay_log(...)`` instead.

    Example::

        def test_the_refund_session_still_replays() -> None:
            assert_replays("tests/sessions/refund.jsonl", agents)
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "assert_replays runs its own event loop; in an async test use "
            "`report = await replay_log(...)` and `assert report.identical, report`"
        )
    report = asyncio.run(replay_log(log, agents, env=env))
    if not report.identical or report.executions == 0:
        raise AssertionError(str(report))
    return report


async def _build_harness(
    conversation: Conversation, agents: Mapping[str, _Definition], env: Mapping[str, str]
) -> Harness:
    """The harness of the agent the conversation names, initialized for its instance."""
    key = conversation.key
    definition = agents.get(key.agent)
    if definition is None:
        known = ", ".join(sorted(agents)) or "none"
        raise LookupError(f"the log's agent {key.agent!r} is not among the agents given ({known})")
    spec = definition.initialize(key.instance, env)
    if inspect.isawaitable(spec):
        spec = await spec
    harness: Harness = spec.harness
    return harness


def _completed_executions(records: Sequence[Record]) -> list[tuple[str, Record, Record]]:
    """``(execution id, start, end)`` of each execution the log holds whole, in start order:
    what a replay runs."""
    starts: dict[str, Record] = {}
    ends: dict[str, Record] = {}
    for record in records:
        if record.execution_id is None:
            continue
        if record.kind == ExecutionStarted.KIND:
            starts[record.execution_id] = record
        elif record.kind == ExecutionEnded.KIND:
            ends[record.execution_id] = record
    return [(key, start, ends[key]) for key, start in starts.items() if key in ends]


def _index(completed: Sequence[tuple[str, Record, Record]], execution_id: str | None) -> int:
    return next((n for n, (key, _, _) in enumerate(completed) if key == execution_id), 0)


# --- the report -----------------------------------------------------------------------------


def _explain(
    exc: ReplayDiverged,
    records: Sequence[Record],
    completed: Sequence[tuple[str, Record, Record]],
) -> ReplayDivergence:
    """The divergence ``exc`` reports, explained against the log it happened on."""
    seq, expected = exc.seq, exc.expected
    if seq is None and exc.execution_id is not None:  # the code asked past the recorded effects
        end = next((end for key, _, end in completed if key == exc.execution_id), None)
        if end is not None:
            seq, expected = end.seq, {"kind": end.kind, "note": "the recorded execution ends here"}
    request = exc.request if isinstance(exc.request, ModelRequest) else None
    lines = [_headline(seq, exc.execution_id, completed, str(exc))]
    lines += _compared(expected, exc.got)
    if request is not None:
        lines += _request_lines(request, records, seq)
    return ReplayDivergence(
        seq, exc.execution_id, str(exc), expected, exc.got, request, tuple(lines)
    )


def _harness_mismatch(
    exc: HarnessMismatch, harness: Harness, completed: Sequence[tuple[str, Record, Record]]
) -> ReplayDivergence:
    """A log recorded by another harness (or version) than the code's: the first execution
    that names another, as the journal checks them."""
    served = {"harness": harness.name, "harnessVersion": harness.version}
    identities = ((start, start.fields["payload"]) for _, start, _ in completed)
    start = next(
        (start for start, p in identities if (p["harness"], p["harnessVersion"]) == exc.recorded),
        None,
    )
    seq = None if start is None else start.seq
    execution_id = None if start is None else start.execution_id
    recorded = {"harness": exc.recorded[0], "harnessVersion": exc.recorded[1]}
    expected = {"kind": ExecutionStarted.KIND, "payload": recorded}
    got = {"kind": ExecutionStarted.KIND, "payload": served}
    lines = [_headline(seq, execution_id, completed, str(exc)), *_compared(expected, got)]
    return ReplayDivergence(seq, execution_id, str(exc), expected, got, None, tuple(lines))


def _headline(
    seq: int | None,
    execution_id: str | None,
    completed: Sequence[tuple[str, Record, Record]],
    message: str,
) -> str:
    where = f"at seq {seq}" if seq is not None else "in the log"
    which = ""
    if execution_id is not None:
        number = _index(completed, execution_id) + 1
        which = f" (execution {number} of {len(completed)}, {execution_id})"
        message = message.removeprefix(f"execution {execution_id}: ")
    return f"diverged {where}{which}: {message}"


_FIRST = ("tool", "args", "model", "inputHash", "name", "output", "callId")
"""The payload fields a report shows first, in this order; the rest follow, sorted."""


def _compared(expected: Mapping[str, Any] | None, got: Mapping[str, Any] | None) -> list[str]:
    recorded = _effect_line(expected) if expected is not None else "nothing"
    asked = _effect_line(got) if got is not None else "nothing (the code ended the execution)"
    lines = [f"  recorded: {recorded}", f"  asked:    {asked}"]
    before = (expected or {}).get("payload") or {}
    after = (got or {}).get("payload") or {}
    if before and after and (expected or {}).get("kind") == (got or {}).get("kind"):
        differ = [key for key in _ordered(after) if key in before and before[key] != after[key]]
        if differ:
            lines.append(f"  differs in: {', '.join(differ)}")
    return lines


def _effect_line(effect: Mapping[str, Any]) -> str:
    payload = effect.get("payload") or {}
    fields = [f"{key}={_short(payload[key])}" for key in _ordered(payload)]
    note = [f"({effect['note']})"] if "note" in effect else []
    return "  ".join([str(effect.get("kind")), *fields, *note])


def _ordered(payload: Mapping[str, Any]) -> list[str]:
    return [key for key in _FIRST if key in payload] + sorted(set(payload) - set(_FIRST))


def _short(value: object, limit: int = 160) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _request_lines(request: ModelRequest, records: Sequence[Record], seq: int | None) -> list[str]:
    """The request the code made (the log keeps only its hash), and how its conversation
    messages compare with the log's transcript at that point."""
    tools = ", ".join(spec.name for spec in request.tools) or "none"
    settings = f", settings {_short(request.settings)}" if request.settings else ""
    choice = f", tool choice {request.tool_choice}" if request.tool_choice else ""
    lines = [
        "  the log keeps a model request only as its hash; the code asked for:",
        f"    model {request.model}, {len(request.messages)} messages, tools: {tools}"
        f"{settings}{choice}",
    ]
    lines += [f"    [{n}] {_message_line(m)}" for n, m in enumerate(request.messages, 1)]
    if seq is None:
        return lines
    logged = transcript(records[: seq - 1])
    asked = [message for message in request.messages if message.role != "system"]
    count = f"{len(logged)} message" + ("" if len(logged) == 1 else "s")
    lines.append(f"  against the log's transcript before seq {seq} ({count}):")
    first = next((n for n, (a, b) in enumerate(zip(asked, logged, strict=False)) if a != b), None)
    if first is not None and 0 < len(asked) < len(logged) and asked == logged[-len(asked) :]:
        left_out = len(logged) - len(asked)
        lines.append(f"    the code leaves out the first {left_out} of them, and sends the rest")
    elif first is not None:
        lines += [
            f"    message {first + 1} differs:",
            f"      the log has: {_message_line(logged[first])}",
            f"      the code:    {_message_line(asked[first])}",
        ]
    elif len(asked) != len(logged):
        more, fewer = (
            ("the code adds", logged) if len(asked) > len(logged) else ("the log has", asked)
        )
        extra = (asked if len(asked) > len(logged) else logged)[len(fewer) :]
        lines.append(f"    the same up to message {len(fewer)}; then {more}:")
        lines += [f"      {_message_line(message)}" for message in extra[:5]]
    else:
        lines.append(
            "    its conversation messages are the log's: what changed is what the log keeps "
            "only in the hash (the system prompt, the tools, the settings or the model)"
        )
    return lines


def _message_line(message: Message) -> str:
    parts = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append(repr(_short(part.text, 300 if message.role == "system" else 120)))
        elif isinstance(part, ToolCallPart):
            parts.append(f"-> {part.name}({_short(part.args, 80)})")
        elif isinstance(part, ToolResultPart):
            parts.append(f"<- {part.call_id}: {_short(part.content, 80)}")
        else:
            parts.append(f"[{part.type}]")
    return f"{message.role} " + " ".join(parts)
