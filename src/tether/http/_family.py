"""``?children=true``: a session's stream with the events of the subagents its task calls
spawned, each child's event under the call that spawned it, resumable at every event.

**Order.** The parent's records are read in seq order. A ``task_spawned`` record opens its
child, whose records are then read beside the parent's, live. The task call's
``tool_outcome`` closes the child, but first sends what of it is left (up to its
``submission_settled``, which is written before its parent's outcome): a child's events come
after its spawn and before its answer in the parent's stream, whatever the timing. A child
still running when the submission that spawned it settles is being cancelled with it, and
is followed no further (its own stream shows its end). Children of children nest the same
way. Only the child's own submission is followed: nothing after its settlement.

**A child's event** is ``event: child`` with the child's ids beside the event: in the
records view ``{"kind": "child", "parentSubmissionId", "parentCallId", "childSubmissionId",
"childConversationId", "agent", "depth", "record": <the child's record>}``, in the stream
view the same with ``"type": "child"`` and ``"event": <the child's canonical event>``. Slot
indexes are the child's own (one map of slots per ``childSubmissionId``).

**Event ids** name the whole merged stream's position: the parent's, as the plain stream
writes it (``<seq>``; ``<seq>:<n>`` in the stream view), then for each open child that has
read records, ``;<path>=<its position>``. ``path`` is the seq of the child's
``task_spawned`` record in its parent's log (``7.3``: the child spawned at seq 3 of the log
of the child spawned at seq 7). In the stream view a position ``<seq>:<n>`` says record
``seq`` was read and its first ``n + 1`` events sent (``n`` is ``-1`` on a child's event
sent after a parent record that had none). Only open children appear, so an id holds one
run's children, not the session's. ``Last-Event-ID`` resumes every source right after what
was sent of it: nothing is sent twice or lost. The one approximation: a child that had not
settled when its parent recorded its answer (``max_wait`` ran out) is sent as far as it had
come when that record was read again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from tether.engine import ProgressHub, ProgressSubscription, Runtime
from tether.http._cursors import FamilyCursor, Position, View
from tether.http._progress import progress_frames
from tether.records import Record, SubmissionSettled, TaskFinished, TaskSpawned, ToolOutcome
from tether.store import SessionKey
from tether.stream import StreamProjector

__all__ = ("family_stream",)

_PAGE = 500
_EFFECTS = frozenset(
    {TaskSpawned.KIND, ToolOutcome.KIND, TaskFinished.KIND, SubmissionSettled.KIND}
)


def _frame(event_id: bytes, event: bytes, data: bytes) -> bytes:
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (event_id, event, data)


@dataclass(frozen=True)
class _Link:
    """How a child hangs under its parent: what its events carry, pre-encoded."""

    path: str
    parent_submission_id: str | None
    call_id: str
    submission_id: str
    key: SessionKey
    header: bytes
    """The child event's JSON up to its ``record``/``event`` value."""


class _Node:
    """One source of the merged stream: the session's log, or a child's."""

    def __init__(
        self,
        family: _Family,
        conversation_id: str,
        link: _Link | None,
        *,
        silent_through: int = 0,
        replay: Position | None = None,
    ) -> None:
        self.family = family
        self.conversation_id = conversation_id
        self.link = link
        self.projector = StreamProjector() if family.view == "stream" else None
        self.cursor = 0
        self.sent = 0  # events of record ``cursor`` sent (or skipped as sent before)
        self.children: dict[str, _Node] = {}
        self.ended = False  # a child that settled: nothing more of it is read
        self.closed = False
        self.behind = True  # records may be waiting to be read
        self.append: asyncio.Task[int] | None = None
        self.progress: ProgressSubscription | None = None
        self._silent_through = silent_through
        self._replay = replay  # re-read this record without drains, skipping what was sent
        self._prepared = False

    # --- position -------------------------------------------------------------------

    def position(self) -> str:
        if self.family.view == "records":
            return str(self.cursor)
        return f"{self.cursor}:{self.sent - 1}"

    def open_nodes(self) -> list[_Node]:
        """Its open children and theirs, depth first."""
        found: list[_Node] = []
        for child in self.children.values():
            found.append(child)
            found.extend(child.open_nodes())
        return found

    # --- reading --------------------------------------------------------------------

    async def _prepare(self) -> None:
        """Read silently what was sent before (a resumed stream, ``?after``): the slots and
        the open children it leaves."""
        self._prepared = True
        runtime = self.family.runtime
        while self.cursor < self._silent_through:
            page = await runtime.records(
                self.conversation_id,
                after=self.cursor,
                limit=min(_PAGE, self._silent_through - self.cursor),
            )
            if not page:
                break
            for record in page:
                async for _ in self._effects(record, drain=False):
                    pass  # never drained: nothing is sent
                self.cursor, self.sent = record.seq, self._count(record)
                if self.ended:
                    return
        if self.cursor < self._silent_through:  # a position past the log's end: after it
            self.cursor, self.sent = self._silent_through, 0

    async def pump(self) -> AsyncIterator[bytes]:
        """What this source and its open children have that was not sent yet."""
        if not self._prepared:
            await self._prepare()
        if self.behind and not self.ended:
            page = await self.family.runtime.records(
                self.conversation_id, after=self.cursor, limit=_PAGE
            )
            if len(page) < _PAGE:
                self.behind = False
            if page:
                self.family.progressed = True
                async for chunk in self._process(page):
                    yield chunk
        for child in list(self.children.values()):
            if not child.closed:
                async for chunk in child.pump():
                    yield chunk

    async def drain(self) -> AsyncIterator[bytes]:
        """Everything left of this child, as far as it has come: its answer is in."""
        if not self._prepared:
            await self._prepare()
        while not self.ended:
            page = await self.family.runtime.records(
                self.conversation_id, after=self.cursor, limit=_PAGE
            )
            if not page:
                break
            async for chunk in self._process(page):
                yield chunk
        for child in list(self.children.values()):
            self.close_child(child)

    async def _process(self, page: list[Record]) -> AsyncIterator[bytes]:
        out: list[bytes] = []
        for record in page:
            replaying = self._replay is not None and record.seq == self._replay[0]
            async for chunk in self._effects(record, drain=not replaying):
                if out:
                    yield b"".join(out)
                    out = []
                yield chunk
            skip = 0
            if replaying and self._replay is not None:
                skip, self._replay = self._replay[1] + 1, None
            self.cursor, self.sent = record.seq, 0
            for name, data in self._events(record):
                self.sent += 1
                if self.sent > skip:
                    out.append(self._frame(name, data))
            if self.ended:
                break
        if out:
            yield b"".join(out)

    # --- what a record does -----------------------------------------------------------

    async def _effects(self, record: Record, *, drain: bool) -> AsyncIterator[bytes]:
        """Open, close or drain the children a record spawns or answers; end a child."""
        if record.kind not in _EFFECTS:
            return
        payload = record.payload
        if isinstance(payload, TaskSpawned):
            self._open(record, payload)
        elif isinstance(payload, ToolOutcome | TaskFinished):
            child = self._answered(record, payload)
            if child is not None:
                if drain:
                    async for chunk in child.drain():
                        yield chunk
                self.close_child(child)
        elif isinstance(payload, SubmissionSettled):
            if self.link is not None and record.submission_id == self.link.submission_id:
                self.ended = True
            for path, child in list(self.children.items()):
                link = child.link
                assert link is not None
                if self.ended or link.parent_submission_id == record.submission_id:
                    self.close_child(self.children[path])

    def _answered(self, record: Record, payload: ToolOutcome | TaskFinished) -> _Node | None:
        for child in self.children.values():
            link = child.link
            assert link is not None
            if isinstance(payload, TaskFinished):
                if link.submission_id == payload.child_submission_id:
                    return child
            elif link.call_id == payload.call_id and (
                link.parent_submission_id == record.submission_id
            ):
                return child
        return None

    def _open(self, record: Record, spawned: TaskSpawned) -> None:
        known = (c.link.submission_id for c in self.children.values() if c.link is not None)
        if spawned.child_submission_id in known:
            return  # one child per call, however often its spawn is recorded
        family = self.family
        path = str(record.seq) if self.link is None else f"{self.link.path}.{record.seq}"
        depth = 1 if self.link is None else self.link.path.count(".") + 2
        ids = {
            ("type" if family.view == "stream" else "kind"): "child",
            "parentSubmissionId": record.submission_id,
            "parentCallId": spawned.call_id,
            "childSubmissionId": spawned.child_submission_id,
            "childConversationId": spawned.child_conversation_id,
            "agent": spawned.agent,
            "depth": depth,
        }
        inner = b',"event":' if family.view == "stream" else b',"record":'
        link = _Link(
            path=path,
            parent_submission_id=record.submission_id,
            call_id=spawned.call_id,
            submission_id=spawned.child_submission_id,
            key=SessionKey(spawned.agent, spawned.instance, spawned.session),
            header=orjson.dumps(ids)[:-1] + inner,
        )
        resumed = family.resume.pop(path, None)
        if resumed is None:
            child = _Node(family, spawned.child_conversation_id, link)
        elif family.view == "records":
            child = _Node(family, spawned.child_conversation_id, link, silent_through=resumed[0])
        else:
            child = _Node(
                family,
                spawned.child_conversation_id,
                link,
                silent_through=resumed[0] - 1,
                replay=resumed,
            )
        if family.hub is not None:
            child.progress = family.hub.subscribe(link.key)
        self.children[path] = child

    def close_child(self, child: _Node) -> None:
        """Follow the child (and its own children) no further."""
        for grandchild in list(child.children.values()):
            child.close_child(grandchild)
        assert child.link is not None
        self.children.pop(child.link.path, None)
        child.closed = True
        if child.append is not None:
            child.append.cancel()
            self.family.cancelled.append(child.append)
            child.append = None
        if child.progress is not None and self.family.hub is not None:
            self.family.hub.unsubscribe(child.link.key, child.progress)
            child.progress = None

    # --- what a record shows ----------------------------------------------------------

    def _count(self, record: Record) -> int:
        if self.projector is None:
            return 1
        return len(self.projector.feed(record))

    def _events(self, record: Record) -> list[tuple[bytes, bytes]]:
        if self.projector is None:
            return [(record.kind.encode(), record.to_json())]
        return [
            (event.type.encode(), event.model_dump_json(exclude_none=True).encode())
            for event in self.projector.feed(record)
        ]

    def _frame(self, name: bytes, data: bytes) -> bytes:
        event_id = self.family.event_id()
        if self.link is None:
            return _frame(event_id, name, data)
        return _frame(event_id, b"child", self.link.header + data + b"}")


class _Family:
    """The merged stream's sources and what they share."""

    def __init__(
        self, runtime: Runtime, view: View, hub: ProgressHub | None, resume: dict[str, Position]
    ) -> None:
        self.runtime = runtime
        self.view = view
        self.hub = hub
        self.resume = resume  # open children's positions, until each is opened
        self.progressed = False
        self.cancelled: list[asyncio.Task[int]] = []  # the waits of closed children
        self.root: _Node | None = None

    def event_id(self) -> bytes:
        assert self.root is not None
        parts = [self.root.position()]
        parts += [
            f"{node.link.path}={node.position()}"
            for node in self.root.open_nodes()
            if node.cursor and node.link is not None
        ]
        return ";".join(parts).encode()


async def family_stream(
    runtime: Runtime,
    conversation_id: str,
    *,
    view: View,
    after: int,
    cursor: FamilyCursor | None,
    follow: bool,
    heartbeat: float,
    progress: ProgressSubscription | None = None,
    hub: ProgressHub | None = None,
) -> AsyncIterator[bytes]:
    """The frames of a session's stream with its children's (see the module's docstring),
    resumed at ``cursor`` (a ``Last-Event-ID``) or after record ``after``, whichever is
    later; it ends once every source is at rest, unless ``follow``."""
    family = _Family(runtime, view, hub, {})
    if cursor is not None and (
        cursor.root[0] > after if view == "stream" else cursor.root[0] >= after
    ):
        family.resume = dict(cursor.children)
        if view == "records":
            root = _Node(family, conversation_id, None, silent_through=cursor.root[0])
        else:
            root = _Node(
                family, conversation_id, None, silent_through=cursor.root[0] - 1, replay=cursor.root
            )
    else:
        root = _Node(family, conversation_id, None, silent_through=after)
    family.root = root
    root.progress = progress
    try:
        while True:
            family.progressed = False
            async for chunk in root.pump():
                yield chunk
            if family.progressed:
                continue
            live = [root, *(n for n in root.open_nodes() if not n.ended)]
            if not follow and await _at_rest(runtime, live):
                if not await _anything_new(runtime, live):
                    return
                continue
            async for chunk in _wait(family, live, heartbeat):
                yield chunk
    finally:
        await _stop(family, root)


async def _at_rest(runtime: Runtime, nodes: list[_Node]) -> bool:
    for node in nodes:
        if not await runtime.at_rest(node.conversation_id):
            return False
    return True


async def _anything_new(runtime: Runtime, nodes: list[_Node]) -> bool:
    """Whether a source got records after all (appended before it came to rest)."""
    found = False
    for node in nodes:
        if await runtime.records(node.conversation_id, after=node.cursor, limit=1):
            node.behind = found = True
    return found


async def _wait(family: _Family, live: list[_Node], heartbeat: float) -> AsyncIterator[bytes]:
    """Until a source gets a record or progress comes: the progress frames, or a heartbeat."""
    runtime = family.runtime
    family.cancelled = [task for task in family.cancelled if not task.done()]
    waits: set[asyncio.Future[Any]] = set()
    for node in live:
        if node.append is None:
            node.append = asyncio.create_task(
                runtime.wait_for_append(node.conversation_id, after=node.cursor)
            )
        waits.add(node.append)
    subscriptions = [n.progress for n in live if n.progress is not None]
    waits.update(s.arrived() for s in subscriptions)
    done, _ = await asyncio.wait(waits, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED)
    if frames := progress_frames(event for s in subscriptions for event in s.take()):
        yield frames
    if not done:
        yield b": heartbeat\n"  # no blank line: see _sse.HEARTBEAT
    for node in live:
        if node.append is not None and node.append.done():
            task, node.append = node.append, None
            task.result()  # a failed wait fails the stream, as the plain one does
            node.behind = True


async def _stop(family: _Family, root: _Node) -> None:
    for child in list(root.children.values()):
        root.close_child(child)
    tasks = family.cancelled
    if root.append is not None:
        root.append.cancel()
        tasks.append(root.append)
    if tasks:
        await asyncio.wait(tasks)
