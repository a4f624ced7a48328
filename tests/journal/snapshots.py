"""What the snapshot tests share: a varied log, views of it taken in three ways, and the
state a view derives, to compare them by."""

from __future__ import annotations

from collections.abc import Sequence

from tether.journal import Journal, JournalHooks, LogView
from tether.records import Record, Signal, SteerReceived
from tether.store import Store
from tether.testing import RecordingTools
from tether.testing.storetest import CompleteStore

from .harnesses import EchoHarness, LoopHarness, new_conversation, planning_model, user
from .test_view import CompactingHarness


def view_state(view: LogView) -> object:
    """Everything a view derives from its records, in comparable form."""
    executions = [
        (
            e.id,
            e.start_index,
            [r.seq for r in e.inputs],
            [r.seq for r in e.effects],
            None if e.end is None else e.end.seq,
        )
        for e in view.executions.by_id.values()
    ]
    by_submission = {k: [e.id for e in v] for k, v in view.executions.by_submission.items()}
    latest = view.latest
    return (
        [r.hash for r in view.records],
        executions,
        by_submission,
        view.messages(),
        view.message_seqs(),
        view.fork_seq,
        view.steer_sources,
        view.conversation,
        None if latest is None else view.history_before(latest),
    )


async def taken_in(store: CompleteStore, conversation_id: str, *, snapshot: bool) -> LogView:
    """A new view of the log, started from its snapshot or (``snapshot=False``) not."""
    view = LogView()
    if not snapshot:
        real = store.get_snapshot

        async def none(conversation_id: str) -> None:
            return None

        store.get_snapshot = none  # type: ignore[method-assign]
        try:
            await view.refresh(store, conversation_id)
        finally:
            store.get_snapshot = real  # type: ignore[method-assign]
        return view
    await view.refresh(store, conversation_id)
    return view


async def varied_log(store: Store) -> str:
    """Executions with tools, a steer, a signal, a compaction; then a fork of it."""
    cid = await new_conversation(store)
    steers = [SteerReceived(body="also lookup", mode="steer", source_submission_id="sub-9")]

    async def source(modes: tuple[str, ...]) -> Sequence[SteerReceived]:
        delivered, steers[:] = list(steers), []
        return delivered

    live = await Journal.open(
        store,
        cid,
        model=planning_model(),
        tools=RecordingTools(),
        hooks=JournalHooks(steer_source=source),
    )
    await live.exec(LoopHarness(), [user("hello")])
    await live.exec(LoopHarness(), [user("lookup and charge")])
    await live.exec(EchoHarness(), [Signal(type="ping", body="{}")])
    await live.exec(CompactingHarness(), [user("and once more")])
    await live.exec(EchoHarness(), [user("after the compaction")])
    return cid


async def taken_in_lean(store: Store, conversation_id: str) -> tuple[LogView, int]:
    """A new view taken in lean, and how many records it read."""
    read = 0
    real = store.read

    async def counted(
        conversation_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> list[Record]:
        nonlocal read
        page = await real(conversation_id, after_seq=after_seq, limit=limit)
        read += len(page)
        return page

    store.read = counted  # type: ignore[method-assign]
    try:
        view = LogView()
        head = await store.head(conversation_id)
        await view.refresh(store, conversation_id, lean=True, known_head=head)
    finally:
        store.read = real  # type: ignore[method-assign]
    return view, read
