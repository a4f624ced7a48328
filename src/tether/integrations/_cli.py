"""What the claude-code and codex integrations share: JSON-lines events from a file, an
iterable or an async iterable; an agent CLI run as a subprocess whose stdout is read as it
comes; and what their harnesses need around ``auto_send_turn`` (the prompt, and a marker in
the transcript that lets the next execution continue the CLI's own session); and
:class:`CliHarness`, the harness both are, which says nothing of the CLI itself.

The subprocess is started with ``asyncio.create_subprocess_exec`` (never a shell), only when
its output is first read, so building a turn for a replay needs no CLI installed. It runs in
a session of its own: a consumer that stops early (a cancelled run, a closed stream) ends the
CLI and what it started with SIGTERM to its process group, then SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
from abc import ABC, abstractmethod
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeAlias, TypeVar

from pydantic import JsonValue

from tether.journal import Turn
from tether.messages import DataPart, Message
from tether.stream import (
    DataContent,
    HarnessTurn,
    SpanSink,
    StreamEvent,
    StreamTaskMessageFull,
    TurnUsage,
    UnifiedEmitter,
)

__all__ = (
    "CliHarness",
    "CliProcess",
    "CliRun",
    "CliTurn",
    "EventLine",
    "EventSource",
    "MarkedTurn",
    "json_events",
    "last_marker",
    "prompt_of",
    "recorded_failure",
)

logger = logging.getLogger("tether.integrations")

EventLine: TypeAlias = "Mapping[str, Any] | str | bytes | bytearray"
"""One event: a decoded JSON object, or its line of JSON text."""

EventSource: TypeAlias = "Iterable[EventLine] | AsyncIterable[EventLine]"
"""Where events come from: a list, an open file, a generator, a CLI's stdout."""

_STDERR_KEPT = 64 * 1024
_READ_CHUNK = 64 * 1024


async def json_events(source: EventSource, *, what: str) -> AsyncGenerator[dict[str, Any], None]:
    """Each event of ``source`` as a dict: objects as they are, lines decoded; blank lines
    are skipped, and a line that is not a JSON object is logged (naming ``what``) and
    skipped. An async source is closed when this stops, however it stops."""
    if isinstance(source, AsyncIterable):
        try:
            async for line in source:
                event = _decode(line, what)
                if event is not None:
                    yield event
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(RuntimeError):  # already closed, or running elsewhere
                    await aclose()
        return
    for line in source:
        event = _decode(line, what)
        if event is not None:
            yield event


def _decode(line: EventLine, what: str) -> dict[str, Any] | None:
    if isinstance(line, Mapping):
        return dict(line)
    text = line.decode("utf-8", "replace") if isinstance(line, bytes | bytearray) else line
    text = text.strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        logger.warning("%s: skipped a line that is not JSON: %.200s", what, text)
        return None
    if not isinstance(value, dict):
        logger.warning("%s: skipped a JSON line that is not an object: %.200s", what, text)
        return None
    return value


class CliProcess:
    """One run of an agent CLI: ``argv`` with ``stdin`` fed to it, stdout read as lines.

    Nothing runs until :meth:`lines` is first iterated, and it can be iterated once. After
    the lines end, :attr:`returncode` is the CLI's exit status (negative: the signal that
    ended it) and :attr:`stderr` the last 64 KiB it wrote there.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        install_hint: str = "",
        terminate_grace: float = 5.0,
    ) -> None:
        if not argv:
            raise ValueError("a CLI run needs a command")
        self.argv = tuple(argv)
        self.cwd = None if cwd is None else Path(cwd)
        self.env = None if env is None else {**os.environ, **env}
        """The CLI's environment: this process's, with ``env`` over it."""
        self.returncode: int | None = None
        self._stdin = stdin
        self._install_hint = install_hint
        self._grace = terminate_grace
        self._stderr = bytearray()
        self._started = False

    @property
    def stderr(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    def executable(self) -> str:
        """The CLI's path, looked up on the ``PATH`` it runs with."""
        path = (self.env if self.env is not None else os.environ).get("PATH", os.defpath)
        found = shutil.which(self.argv[0], path=path)
        if found is None:
            hint = f" ({self._install_hint})" if self._install_hint else ""
            raise FileNotFoundError(f"{self.argv[0]} is not on PATH{hint}")
        return found

    async def lines(self) -> AsyncGenerator[bytes, None]:
        """The CLI's stdout, line by line (any length), as it writes it."""
        if self._started:
            raise RuntimeError(f"{self.argv[0]} was already run: a CLI run is read once")
        self._started = True
        process = await asyncio.create_subprocess_exec(
            self.executable(),
            *self.argv[1:],
            stdin=asyncio.subprocess.PIPE
            if self._stdin is not None
            else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            env=self.env,
            start_new_session=True,  # its own process group: ended with what it started
        )
        helpers = [asyncio.create_task(self._drain_stderr(process))]
        if self._stdin is not None:
            helpers.append(asyncio.create_task(self._feed(process, self._stdin)))
        try:
            assert process.stdout is not None
            pending = b""
            while chunk := await process.stdout.read(_READ_CHUNK):
                *complete, pending = (pending + chunk).split(b"\n")
                for line in complete:
                    yield line
            if pending:
                yield pending
            self.returncode = await process.wait()
        finally:
            if process.returncode is None:
                await self._end(process)
            self.returncode = process.returncode
            for helper in helpers:
                if not helper.done():
                    helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _feed(self, process: asyncio.subprocess.Process, text: str) -> None:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(text.encode())
            await process.stdin.drain()
            process.stdin.close()
            await process.stdin.wait_closed()

    async def _drain_stderr(self, process: asyncio.subprocess.Process) -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.read(_READ_CHUNK):
            self._stderr += chunk
            del self._stderr[:-_STDERR_KEPT]

    async def _end(self, process: asyncio.subprocess.Process) -> None:
        """Stop a CLI whose output nobody reads any more: SIGTERM to its process group,
        SIGKILL if it has not gone after the grace period."""
        for sig, wait in ((signal.SIGTERM, self._grace), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
            try:
                await asyncio.wait_for(process.wait(), wait)
                return
            except TimeoutError:
                continue


# --- what the CLI harnesses share ------------------------------------------------------


def prompt_of(inputs: Sequence[Message]) -> str:
    """An execution's inputs as one prompt: their text, in order, a blank line apart."""
    prompt = "\n\n".join(message.text for message in inputs if message.text)
    if not prompt:
        raise ValueError("the execution's inputs have no text to send to the CLI")
    return prompt


def last_marker(history: Sequence[Message], key: str) -> dict[str, JsonValue] | None:
    """The latest value a :class:`MarkedTurn` left in the transcript under ``key``."""
    for message in reversed(history):
        if message.role != "assistant":
            continue
        for part in reversed(message.parts):
            if isinstance(part, DataPart) and isinstance(part.data, dict):
                value = part.data.get(key)
                if isinstance(value, dict):
                    return value
    return None


class MarkedTurn:
    """A tapped turn whose events end with a data message ``{key: marker()}``: journaled
    as a data part of the turn's last message, it is in the next execution's history (an
    SSE reader does not see it), so that one can continue the CLI's session."""

    def __init__(
        self,
        inner: HarnessTurn,
        key: str,
        marker: Callable[[], dict[str, JsonValue] | None],
        usage: Callable[[TurnUsage], TurnUsage] | None = None,
    ) -> None:
        self._inner = inner
        self._key = key
        self._marker = marker
        self._usage = usage

    @property
    def events(self) -> AsyncIterator[StreamEvent]:
        return self._events()

    async def _events(self) -> AsyncGenerator[StreamEvent, None]:
        last = -1
        source = self._inner.events
        try:
            async for event in source:
                last = max(last, event.index if event.index is not None else -1)
                yield event
        finally:
            if isinstance(source, AsyncGenerator):
                await source.aclose()
        marker = self._marker()
        if marker is not None:
            content = DataContent(author="agent", data={self._key: marker})
            yield StreamTaskMessageFull(index=last + 1, content=content)

    def usage(self) -> TurnUsage:
        usage = self._inner.usage()
        return usage if self._usage is None else self._usage(usage)


StateT = TypeVar("StateT")


class CliTurn(Generic[StateT]):
    """What a tapped CLI run's :class:`~tether.stream.HarnessTurn` shares: its source (events,
    or a CLI run), the model it names, and the state its conversion keeps, made afresh each
    time ``events`` is read. A tap says how to make the state and how to convert."""

    def __init__(self, source: EventSource | CliProcess, *, model: str | None = None) -> None:
        self._source = source
        self._model = model
        self._state = self._new_state()

    def _new_state(self) -> StateT:
        raise NotImplementedError

    def _convert(self, lines: EventSource, state: StateT) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    @property
    def process(self) -> CliProcess | None:
        """The CLI run this turn reads, if it is one: its ``argv``, ``returncode`` and
        ``stderr`` (valid once the events are exhausted)."""
        return self._source if isinstance(self._source, CliProcess) else None

    @property
    def events(self) -> AsyncIterator[StreamEvent]:
        self._state = self._new_state()
        source = self._source
        lines = source.lines() if isinstance(source, CliProcess) else source
        return self._convert(lines, self._state)

    @property
    def failure(self) -> str | None:
        """Why the run failed (``None`` if it did not)."""
        raise NotImplementedError

    def usage(self) -> TurnUsage:
        """The run's token usage, as the CLI reported it."""
        raise NotImplementedError


async def recorded_failure(
    turn: Turn, step: str, tapped: CliTurn[Any], ids: Mapping[str, JsonValue]
) -> str | None:
    """Journal how a CLI run ended (``ids``, its failure, its exit status) in the step
    ``step``, and return its failure: a replay reads the step back, without a CLI."""

    async def outcome() -> JsonValue:
        process = tapped.process
        return {
            **ids,
            "failure": tapped.failure,
            "exitCode": None if process is None else process.returncode,
        }

    ended = await turn.step(step, outcome)
    failure = ended.get("failure") if isinstance(ended, dict) else None
    return failure if isinstance(failure, str) else None


@dataclass(frozen=True, slots=True)
class CliRun:
    """One execution's CLI run, as a :class:`CliHarness` subclass starts it: the tapped
    turn, the marker it leaves for the next execution, the ids its outcome records, and how
    its usage is read (``None``: as the CLI reports it)."""

    tapped: CliTurn[Any]
    marker: Callable[[], dict[str, JsonValue] | None]
    ids: Callable[[], dict[str, JsonValue]]
    usage: Callable[[TurnUsage], TurnUsage] | None = None


class CliHarness(ABC):
    """Runs an agent CLI once per execution on the execution's input, and writes the run
    into the session's log with :meth:`~tether.stream.UnifiedEmitter.auto_send_turn`: what
    it streams stays across restarts and replays with no CLI (a replay never starts it).

    With ``resume`` a session's later messages continue the CLI's own session, from the
    marker the previous run left in the transcript under ``marker_key``. A crash mid-run
    cannot resume the CLI in the middle: the resumed execution keeps what was recorded and
    runs the CLI again from the start. How a run ended is journaled in the step
    ``outcome_step``; a run that failed raises ``failed``. A subclass names these and
    starts the run (:meth:`start`).

    Example::

        class Mine(CliHarness):
            name, marker_key, outcome_step, failed = "mine", "x", "x.outcome", RuntimeError

            def start(self, prompt, marker):
                tapped = run_mine(prompt, executable=self.executable, args=self.args)
                return CliRun(tapped, lambda: None, lambda: {})
    """

    name: str
    marker_key: ClassVar[str]
    outcome_step: ClassVar[str]
    failed: ClassVar[type[Exception]]

    def __init__(
        self,
        *,
        model: str | None,
        args: Sequence[str],
        cwd: str | os.PathLike[str] | None,
        env: Mapping[str, str] | None,
        executable: str,
        resume: bool,
        tracer: SpanSink | None,
        version: str,
    ) -> None:
        self.model = model
        self.args = tuple(args)
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.executable = executable
        self.resume = resume
        self.emitter = UnifiedEmitter(tracer=tracer)
        self.version = version

    @abstractmethod
    def start(self, prompt: str, marker: Mapping[str, JsonValue]) -> CliRun:
        """The run of ``prompt`` (not started until its events are read), continuing from
        ``marker`` (empty: a new session)."""

    async def run(self, turn: Turn) -> JsonValue:
        marker = last_marker(turn.history, self.marker_key) if self.resume else None
        run = self.start(prompt_of(turn.inputs), marker or {})
        marked = MarkedTurn(run.tapped, self.marker_key, run.marker, run.usage)
        result = await self.emitter.auto_send_turn(marked, turn)
        failure = await recorded_failure(turn, self.outcome_step, run.tapped, run.ids())
        if failure is not None:
            raise self.failed(failure)
        return result.final_text
