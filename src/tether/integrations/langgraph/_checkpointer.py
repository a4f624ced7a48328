"""``TetherCheckpointer``: LangGraph's checkpointer interface over Tether's store, so an
unmodified graph compiled with ``checkpointer=`` keeps its checkpoints in a session log.

A thread is a session (agent ``langgraph``, instance ``threads``, the thread id as the
session's name); its checkpoints and pending writes are records of that session's log
(:mod:`._thread_log`), so the store is the only truth and its hash chain covers them. Copying
a thread is a fork of its session, and :meth:`TetherCheckpointer.fork` forks one at a
checkpoint: time travel onto a thread of its own.

The store lives on an event loop of the saver's own, on a thread of its own, so the sync
methods (``graph.invoke``) and the async ones (``graph.ainvoke``, from any loop) reach the
same store: one ``memory://`` store is one store.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Self, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from pydantic import JsonValue

from tether._ids import new_ulid
from tether.engine import Runtime
from tether.errors import Conflict, ConversationNotFound
from tether.integrations.langgraph._errors import UnsupportedConstruct
from tether.integrations.langgraph._serde import CheckpointSerde, json_only_serde
from tether.integrations.langgraph._store import TetherStore
from tether.integrations.langgraph._thread_log import (
    CHECKPOINT,
    WRITES,
    StoredCheckpoint,
    ThreadLog,
    write_index,
)
from tether.records import RecordDraft, StepRecorded
from tether.store import SessionKey

__all__ = ("TetherCheckpointer",)

_T = TypeVar("_T")
_RUNTIME_KEY = "__pregel_runtime"
"""Where LangGraph hands a run's ``Runtime`` (its ``store=`` among it) to the saver's config."""
_PAGE = 1000


class TetherCheckpointer(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer whose checkpoints are records of Tether session logs.

    ``store`` is a Tether store URL (``memory://``, ``sqlite:///dir``,
    ``postgresql://...``). Each thread is the session ``agent/instance/<thread id>``.
    Values that are JSON are kept as JSON; anything else goes through ``serde`` (LangGraph's
    ``JsonPlusSerializer`` with its pickle fallback off, by default; one that may pickle is
    refused). ``delete_thread`` needs the store's ``retention`` capability, ``copy_thread``
    and :meth:`fork` its ``forks``, ``list(None)`` its ``sessions``: without it they raise
    ``StoreCapabilityMissing`` naming it. A graph compiled with a ``store=`` other than
    :class:`TetherStore` (Tether's long-term memory) is refused (``UnsupportedConstruct``).

    Example::

        from tether.integrations.langgraph import TetherCheckpointer

        with TetherCheckpointer("sqlite:///./tether-data") as saver:
            graph = builder.compile(checkpointer=saver)
            graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})
            print(graph.get_state({"configurable": {"thread_id": "t1"}}).values)
    """

    def __init__(
        self,
        store: str,
        *,
        agent: str = "langgraph",
        instance: str = "threads",
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=json_only_serde(serde))
        self.agent = agent
        self.instance = instance
        self._threads: dict[str, ThreadLog] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tether-checkpointer", daemon=True
        )
        self._thread.start()
        self._runtime = Runtime({}, store=store)
        try:
            self._call(self._runtime.start(worker=False))
        except BaseException:
            self._stop()
            raise
        self._lock = self._call(_new_lock())

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the store and stop the saver's loop (idempotent)."""
        if self._thread.is_alive():
            try:
                self._call(self._runtime.close())
            finally:
                self._stop()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _submit(self, work: Coroutine[Any, Any, _T]) -> Future[_T]:
        if not self._thread.is_alive():
            work.close()
            raise RuntimeError("the checkpointer is closed")
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    def _call(self, work: Coroutine[Any, Any, _T]) -> _T:
        return self._submit(work).result()

    async def _acall(self, work: Coroutine[Any, Any, _T]) -> _T:
        return await asyncio.wrap_future(self._submit(work))

    @property
    def _codec(self) -> CheckpointSerde:
        return CheckpointSerde(self.serde)  # follows with_allowlist's copy, which swaps serde

    # -- the saver's methods ------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._call(self._get_tuple(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._acall(self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._call(self._list(config, filter, before, limit))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for found in await self._acall(self._list(config, filter, before, limit)):
            yield found

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._call(self._put(config, checkpoint, metadata, new_versions))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._acall(self._put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._call(self._put_writes(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._acall(self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._call(self._delete_thread(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._acall(self._delete_thread(thread_id))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._call(self._copy_thread(source_thread_id, target_thread_id))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._acall(self._copy_thread(source_thread_id, target_thread_id))

    def fork(self, config: RunnableConfig, thread_id: str) -> RunnableConfig:
        """Time travel onto a new thread: ``thread_id`` starts as the thread of ``config``
        was when its checkpoint (``checkpoint_id``, else the newest) was taken, a fork of
        its session's log at that checkpoint's record. Returns the config to invoke it with.

        Example::

            past = next(s for s in graph.get_state_history(config) if s.next == ("tools",))
            branch = saver.fork(past.config, "t1-retry")
            graph.invoke(None, branch)  # runs on from that checkpoint, t1 untouched
        """
        return self._call(self._fork(config, thread_id))

    async def afork(self, config: RunnableConfig, thread_id: str) -> RunnableConfig:
        """:meth:`fork`, awaited."""
        return await self._acall(self._fork(config, thread_id))

    # -- on the saver's loop ------------------------------------------------------------

    def _key(self, thread_id: str) -> SessionKey:
        return SessionKey(self.agent, self.instance, str(thread_id))

    async def _thread_log(self, thread_id: str, *, create: bool) -> ThreadLog | None:
        """The thread's fold, caught up with its log (``None``: no such thread)."""
        store = self._runtime.store
        log = self._threads.get(thread_id)
        while True:
            if log is None:
                try:
                    conversation = await store.find_conversation(self._key(thread_id))
                except ConversationNotFound:
                    if not create:
                        return None
                    conversation, _ = await store.ensure_conversation(
                        self._key(thread_id),
                        conversation_id=new_ulid(),
                        created_at=self._runtime.clock.now(),
                    )
                log = self._threads[thread_id] = ThreadLog(conversation.id)
            try:
                while True:
                    records = await store.read(log.conversation_id, after_seq=log.seq, limit=_PAGE)
                    log.take(records)
                    if len(records) < _PAGE:
                        return log
            except ConversationNotFound:  # erased elsewhere: find it again
                self._threads.pop(thread_id, None)
                log = None

    async def _append(self, thread_id: str, name: str, value: JsonValue) -> None:
        log = await self._thread_log(thread_id, create=True)
        assert log is not None
        draft = RecordDraft(StepRecorded(call_id="", name=name, value=value))
        while True:
            try:
                # Fence 0: a saver is no Tether writer, and a log a worker minted a fence on
                # (an agent's session) refuses it with Fenced.
                records = await self._runtime.store.append(
                    log.conversation_id, [draft], expected_seq=log.seq, fence=0
                )
            except Conflict:  # another saver appended: each record is a fact of its own
                log = await self._thread_log(thread_id, create=True)
                assert log is not None
                continue
            log.take(records)
            return

    async def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        _refuse_store(config)
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        async with self._lock:
            log = await self._thread_log(thread_id, create=False)
            if log is None:
                return None
            found = log.find(ns, get_checkpoint_id(config))
            return None if found is None else self._tuple(thread_id, log, found)

    def _tuple(self, thread_id: str, log: ThreadLog, stored: StoredCheckpoint) -> CheckpointTuple:
        codec = self._codec
        checkpoint = codec.load(stored.body)
        checkpoint["channel_values"] = {
            channel: codec.load(value) for channel, value in log.channel_values(stored).items()
        }
        return CheckpointTuple(
            config=_config(thread_id, stored.ns, stored.id),
            checkpoint=checkpoint,
            metadata=codec.load(stored.metadata),
            parent_config=(_config(thread_id, stored.ns, stored.parent) if stored.parent else None),
            pending_writes=[
                (write.task_id, write.channel, codec.load(write.value))
                for write in log.pending_writes(stored)
            ],
        )

    async def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> builtins.list[CheckpointTuple]:
        if config is not None:
            _refuse_store(config)
        configurable = (config or {}).get("configurable", {})
        ns = configurable.get("checkpoint_ns")
        before_id = get_checkpoint_id(before) if before else None
        if config is None:
            threads = await self._thread_ids()
        else:
            threads = [str(configurable["thread_id"])]
        found: builtins.list[CheckpointTuple] = []
        async with self._lock:
            for thread_id in threads:
                log = await self._thread_log(thread_id, create=False)
                if log is None:
                    continue
                for stored in log.newest_first(ns):
                    if limit is not None and len(found) >= limit:
                        return found
                    if before_id is not None and stored.id >= before_id:
                        continue
                    if filter:
                        metadata = self._codec.load(stored.metadata)
                        if any(metadata.get(k) != v for k, v in filter.items()):
                            continue
                    found.append(self._tuple(thread_id, log, stored))
        return found

    async def _thread_ids(self) -> builtins.list[str]:
        """Every thread of this saver's agent and instance (the ``sessions`` capability)."""
        threads: builtins.list[str] = []
        cursor: str | None = None
        while True:
            page = await self._runtime.sessions(
                agent=self.agent, instance=self.instance, limit=500, cursor=cursor
            )
            threads.extend(info.key.session for info in page.sessions)
            cursor = page.next_cursor
            if cursor is None:
                return threads

    async def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        _refuse_store(config)
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        codec = self._codec
        body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        values = checkpoint["channel_values"]
        value: JsonValue = {
            "ns": ns,
            "id": checkpoint["id"],
            "parent": configurable.get("checkpoint_id"),
            "body": codec.dump(body),
            "metadata": codec.dump(get_checkpoint_metadata(config, metadata)),
            "versions": dict(checkpoint["channel_versions"]),
            "values": [
                [channel, version, codec.dump(values[channel]) if channel in values else None]
                for channel, version in new_versions.items()
            ],
        }
        async with self._lock:
            await self._append(thread_id, CHECKPOINT, value)
        return _config(thread_id, ns, checkpoint["id"])

    async def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> None:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = str(configurable["checkpoint_id"])
        codec = self._codec
        async with self._lock:
            log = await self._thread_log(thread_id, create=True)
            assert log is not None
            kept = log.writes.get((ns, checkpoint_id), {})
            entries: builtins.list[JsonValue] = []
            for position, (channel, value) in enumerate(writes):
                index = write_index(channel, position)
                if index >= 0 and (task_id, index) in kept:
                    continue  # written already: the first stays
                entries.append([index, channel, codec.dump(value)])
            if entries:
                await self._append(
                    thread_id,
                    WRITES,
                    {
                        "ns": ns,
                        "checkpoint": checkpoint_id,
                        "task": task_id,
                        "path": task_path,
                        "writes": entries,
                    },
                )

    async def _delete_thread(self, thread_id: str) -> None:
        async with self._lock:
            self._threads.pop(str(thread_id), None)
            try:
                await self._runtime.erase_session(
                    self.agent, self.instance, session=str(thread_id), force=True
                )
            except ConversationNotFound:
                pass

    async def _copy_thread(self, source: str, target: str) -> None:
        async with self._lock:
            log = await self._thread_log(str(source), create=False)
            if log is None:
                return
            await self._runtime.fork(log.conversation_id, at_seq=log.seq, session=str(target))

    async def _fork(self, config: RunnableConfig, target: str) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        async with self._lock:
            log = await self._thread_log(thread_id, create=False)
            stored = None if log is None else log.find(ns, checkpoint_id)
            if log is None or stored is None:
                raise ValueError(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}")
            await self._runtime.fork(log.conversation_id, at_seq=stored.seq, session=str(target))
        return _config(str(target), ns, stored.id)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _refuse_store(config: RunnableConfig) -> None:
    runtime = config.get("configurable", {}).get(_RUNTIME_KEY)
    store = getattr(runtime, "store", None)
    if store is not None and not isinstance(store, TetherStore):
        raise UnsupportedConstruct(
            "the graph is compiled with a store other than TetherStore: its reads and writes "
            "would happen outside Tether's store; compile it with store=TetherStore(memory) "
            "(docs/memory.md), or keep what must last in the graph's state"
        )


async def _new_lock() -> asyncio.Lock:
    return asyncio.Lock()  # made on the saver's loop, where it is used
