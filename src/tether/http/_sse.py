"""Server-sent events: replay a session's records after an offset, then tail it live.

Everything is read through the runtime's public operations (``records``,
``wait_for_append``, ``at_rest``, ``conversation``), as an embedding application would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from tether._failpoints import hit
from tether.engine import ProgressHub, ProgressSubscription, Runtime
from tether.errors import ConversationNotFound
from tether.http._cursors import FamilyCursor, View
from tether.http._family import family_stream
from tether.http._progress import progress_frames
from tether.records import Record
from tether.store import SessionKey
from tether.stream import AgUiProjector, AiSdkProjector, RunProjector, StreamProjector, WireEvent

__all__ = (
    "RecentRecords",
    "View",
    "failpoint_frames",
    "frame",
    "protocol_projector",
    "record_stream",
    "session_stream",
)

Render = Callable[[Sequence[Record]], bytes]

_PAGE = 500
MIB = 1024 * 1024
RETRY_MS = 2000
_CREATION_POLL = 0.05
# A field line, not a frame: no blank line ends it, so it belongs to the first event. A
# browser's EventSource takes the reconnection time as soon as it reads the line; a client
# that dispatches whatever a blank line ends (agentex's SSEDecoder) would otherwise see an
# event with no data and fail to parse it as JSON.
RETRY = b"retry: %d\n" % RETRY_MS
# A comment line, with no blank line after it for the same reason: agentex's decoder keeps
# the last ``id:`` and dispatches an empty event at a blank line once it has seen one.
HEARTBEAT = b": heartbeat\n"


def _frame(event_id: bytes, event: str, data: bytes) -> bytes:
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (event_id, event.encode(), data)


def frame(record: Record) -> bytes:
    """One SSE frame; the record's stored bytes go out as they are (no re-encoding)."""
    return _frame(b"%d" % record.seq, record.kind, record.to_json())


def _render_records(page: Sequence[Record]) -> bytes:
    return b"".join(frame(record) for record in page)


def _event_frames(projector: StreamProjector) -> Callable[[Record], list[tuple[str, bytes]]]:
    def events(record: Record) -> list[tuple[str, bytes]]:
        return [
            (event.type, event.model_dump_json(exclude_none=True).encode())
            for event in projector.feed(record)
        ]

    return events


def _wire_frames(projector: RunProjector) -> Callable[[Record], list[tuple[str, bytes]]]:
    def events(record: Record) -> list[tuple[str, bytes]]:
        return [("", _json(event)) for event in projector.feed(record)]

    return events


def _json(event: WireEvent) -> bytes:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()


def protocol_projector(
    view: View, *, submission: str | None = None, since: int = 0
) -> RunProjector | None:
    """The projector of a protocol view (``ag-ui``, ``ai-sdk``), ``None`` for the others.
    ``submission``: that submission's run alone (after seq ``since``), as a reply to the
    request that sent it."""
    users = submission is None
    if view == "ag-ui":
        return AgUiProjector(submission=submission, users=users, since=since)
    if view == "ai-sdk":
        return AiSdkProjector(submission=submission, users=users, since=since)
    return None


async def _stream_renderer(
    runtime: Runtime,
    conversation_id: str,
    after: int,
    skip: int,
    events: Callable[[Record], list[tuple[str, bytes]]],
) -> Render:
    """Frames of the events ``events`` makes of each record (canonical stream events, or a
    protocol's) with ids ``<seq>:<n>``: the n-th event made of record ``seq``. Resuming
    after ``seq:n`` re-projects record ``seq`` and drops its first ``n + 1`` events, so a
    cut between the events of one record loses and repeats nothing. What an event is
    depends on all that came before, so the skipped prefix is projected silently first.
    A protocol's frames have no ``event:`` line: their clients read ``data`` alone.
    """
    cursor = 0
    while cursor < after:
        page = await runtime.records(
            conversation_id, after=cursor, limit=min(_PAGE, after - cursor)
        )
        if not page:
            break
        for record in page:
            events(record)
        cursor = page[-1].seq
    pending_skip = skip

    def render(page: Sequence[Record]) -> bytes:
        nonlocal pending_skip
        frames = []
        for record in page:
            for n, (name, data) in enumerate(events(record)):
                if n < pending_skip:
                    continue
                event_id = b"%d:%d" % (record.seq, n)
                if name:
                    frames.append(_frame(event_id, name, data))
                else:
                    frames.append(b"id: %s\ndata: %s\n\n" % (event_id, data))
            pending_skip = 0
        return b"".join(frames)

    return render


def _connection_dropped(name: str) -> BaseException:
    return ConnectionResetError(f"connection reset by peer (failpoint {name})")


async def failpoint_frames(
    frames: AsyncIterator[bytes], *, sleep: Callable[[float], Awaitable[None]]
) -> AsyncIterator[bytes]:
    """``frames`` with failpoint ``sse.send`` before each chunk is sent (docs/testing.md):
    an ``error`` drops the connection there, as a peer's reset does."""
    async with contextlib.aclosing(frames):  # type: ignore[type-var]
        async for chunk in frames:
            await hit("sse.send", error=_connection_dropped, sleep=sleep)
            yield chunk


async def session_stream(
    runtime: Runtime,
    recent: RecentRecords,
    key: SessionKey,
    conversation_id: str | None,
    *,
    after: int,
    follow: bool,
    heartbeat: float,
    view: View = "records",
    skip: int = 0,
    progress: ProgressHub | None = None,
    children: bool = False,
    cursor: FamilyCursor | None = None,
    sees: Callable[[str | None], bool] = lambda tenant: True,
    projector: RunProjector | None = None,
) -> AsyncIterator[bytes]:
    """The stream of one session; a followed session that does not exist yet is awaited
    (one of a tenant the caller does not ``sees`` does not exist, to them).

    A browser commonly opens its stream before sending the first message, so a follower
    of a session with no conversation gets heartbeats until the first dispatch creates it.
    With ``children`` the subagents' events are merged in (``_family``), resumed at
    ``cursor`` or after ``after``; ``skip`` is the plain stream view's alone. A protocol
    view (``ag-ui``, ``ai-sdk``) renders with ``projector`` if given (one that shows one
    submission's run, and ends the stream once it settled), else a fresh one.
    """
    yield RETRY
    subscription = progress.subscribe(key) if progress is not None else None
    try:
        loop = asyncio.get_running_loop()
        beat_at = loop.time() + heartbeat
        while conversation_id is None:
            await asyncio.sleep(_CREATION_POLL)
            try:
                # The route has checked the agent: only the conversation may be missing.
                conversation = await runtime.conversation(
                    key.agent, key.instance, session=key.session
                )
                if not sees(conversation.tenant):
                    raise ConversationNotFound(str(key))
                conversation_id = conversation.id
            except ConversationNotFound:
                if loop.time() >= beat_at:
                    beat_at = loop.time() + heartbeat
                    yield HEARTBEAT
        if children:
            async for chunk in family_stream(
                runtime,
                conversation_id,
                view=view,
                after=after,
                cursor=cursor,
                follow=follow,
                heartbeat=heartbeat,
                progress=subscription,
                hub=progress,
            ):
                yield chunk
            return
        wire = projector if projector is not None else protocol_projector(view)
        render: Render = _render_records
        if view != "records":
            events = _event_frames(StreamProjector()) if wire is None else _wire_frames(wire)
            render = await _stream_renderer(runtime, conversation_id, after, skip, events)
        async for chunk in record_stream(
            runtime,
            recent,
            conversation_id,
            after=after,
            follow=follow,
            heartbeat=heartbeat,
            render=render,
            # A protocol's client takes every ``data`` for one of its events: no progress.
            progress=subscription if wire is None else None,
            finished=(lambda: wire.done) if wire is not None else None,
        ):
            if chunk:
                yield chunk
        if projector is not None:
            # A reply's run left open (parked for a person) ends as the protocol says,
            # without an id. A session's stream leaves it open: a reconnection goes on
            # with the run where it stopped.
            yield b"".join(b"data: %s\n\n" % _json(event) for event in projector.close())
        if view == "ai-sdk":
            yield b"data: [DONE]\n\n"
    finally:
        if progress is not None and subscription is not None:
            progress.unsubscribe(key, subscription)


class RecentRecords:
    """The newest records of each followed conversation, shared by all its subscribers.

    When an append wakes a hundred subscribers, one of them reads the new records from the
    store and the rest are served from here: one store read per append, not one per
    subscriber. Records are immutable once appended, so a cached record is never stale.

    A record held costs about twice its encoded size once read, so the 16 MiB default keeps
    this cache to some 32 MiB of a server's memory; a subscriber further behind than the
    tail reads from the store, as a new one does.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        keep: int = 1000,
        conversations: int = 1024,
        keep_bytes: int = 1 * MIB,
        total_bytes: int = 16 * MIB,
    ) -> None:
        self._runtime = runtime
        self._keep = keep
        self._keep_bytes = keep_bytes
        self._conversations = conversations
        self._total_bytes = total_bytes
        self._tails: OrderedDict[str, list[Record]] = OrderedDict()
        self._sizes: dict[str, int] = {}  # encoded bytes of each tail
        self.size = 0
        """The encoded bytes of every record held: at most ``total_bytes``."""
        self._locks: dict[str, asyncio.Lock] = {}

    def __len__(self) -> int:
        return len(self._tails)

    async def read(self, conversation_id: str, *, after: int, head: int) -> list[Record]:
        """Records ``after+1 ..`` (at most a page), known to exist up to ``head``."""
        lock = self._locks.setdefault(conversation_id, asyncio.Lock())
        async with lock:  # the first subscriber in fills the tail for the others
            tail = self._tails.get(conversation_id, [])
            if tail and tail[0].seq <= after + 1 and tail[-1].seq >= head:
                start = after + 1 - tail[0].seq
                return tail[start : start + _PAGE]
            page = await self._runtime.records(conversation_id, after=after, limit=_PAGE)
            if page:
                self._remember(conversation_id, tail, page)
            elif conversation_id not in self._tails:
                self._locks.pop(conversation_id, None)  # nothing shared: hold no lock for it
            return page

    def _remember(self, conversation_id: str, tail: list[Record], page: list[Record]) -> None:
        joined = tail + page if tail and tail[-1].seq + 1 == page[0].seq else page
        joined = joined[-self._keep :]
        size = sum(len(record.canonical) for record in joined)
        first = 0
        while size > self._keep_bytes and first < len(joined) - 1:  # keep at least the newest
            size -= len(joined[first].canonical)
            first += 1
        self._tails[conversation_id] = joined[first:]
        self.size += size - self._sizes.get(conversation_id, 0)
        self._sizes[conversation_id] = size
        self._tails.move_to_end(conversation_id)
        while len(self._tails) > 1 and (
            len(self._tails) > self._conversations or self.size > self._total_bytes
        ):
            forgotten, _ = self._tails.popitem(last=False)
            self.size -= self._sizes.pop(forgotten)
            self._locks.pop(forgotten, None)


async def record_stream(
    runtime: Runtime,
    recent: RecentRecords,
    conversation_id: str,
    *,
    after: int,
    follow: bool,
    heartbeat: float,
    render: Render = _render_records,
    progress: ProgressSubscription | None = None,
    finished: Callable[[], bool] | None = None,
) -> AsyncIterator[bytes]:
    """Frames for every record after ``after``, then live ones as they are appended, with
    ``progress`` frames (no ``id:``) sent whenever they come while it waits for records.
    It ends as soon as ``finished()`` says so after a page, if given.

    Without ``follow`` the stream ends once the session is at rest (nothing queued or
    running; parked for a human or a child task, which may take days, counts: the stream is
    reopened later) and every record has been sent. Frames of one page go out in one write.
    """
    cursor = after
    behind = True  # until a read comes back short, there may be more in the store
    append: asyncio.Task[int] | None = None  # a wait for the next record, across heartbeats
    try:
        while True:
            if behind:
                page = await runtime.records(conversation_id, after=cursor, limit=_PAGE)
                if page:
                    cursor = page[-1].seq
                    yield render(page)
                    if finished is not None and finished():
                        return
                    continue
                behind = False
            if not follow and await runtime.at_rest(conversation_id):
                # At rest now; anything appended before it came to rest is already readable.
                if not await runtime.records(conversation_id, after=cursor, limit=1):
                    return
                behind = True
                continue
            if append is None:
                append = asyncio.create_task(runtime.wait_for_append(conversation_id, after=cursor))
            waits: set[asyncio.Future[Any]] = {append}
            if progress is not None:
                waits.add(progress.arrived())
            done, _ = await asyncio.wait(
                waits, timeout=heartbeat, return_when=asyncio.FIRST_COMPLETED
            )
            if progress is not None and (frames := progress_frames(progress.take())):
                yield frames
            if append not in done:
                if not done:
                    yield HEARTBEAT
                continue
            head, append = append.result(), None
            while cursor < head:
                page = await recent.read(conversation_id, after=cursor, head=head)
                if not page:
                    break
                cursor = page[-1].seq
                yield render(page)
                if finished is not None and finished():
                    return
    finally:
        if append is not None:
            append.cancel()
            await asyncio.wait({append})
