"""The collector pause around bulk decodes: bounded, counted, and polite to the application."""

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest

from tether import _gc
from tether._gc import BULK, collector_paused, freeze_startup_heap
from tether.records import RecordDraft, UserMessage
from tether.store import SessionKey, SqliteStore

T = TypeVar("T")


@pytest.fixture(autouse=True)
def _nothing_known_frozen(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What a test learns of frozen objects is forgotten after it (and so are they)."""
    monkeypatch.setattr(_gc, "_frozen", False)
    yield
    gc.unfreeze()


def test_a_small_decode_leaves_the_collector_alone() -> None:
    with collector_paused(BULK - 1):
        assert gc.isenabled()


def test_a_bulk_decode_pauses_the_collector_until_the_last_overlapping_pause_ends() -> None:
    inner_started, outer_may_end = threading.Event(), threading.Event()

    def overlapping() -> None:
        with collector_paused(BULK):
            inner_started.set()
            outer_may_end.wait(5)

    with collector_paused(BULK):
        assert not gc.isenabled()
        thread = threading.Thread(target=overlapping)
        thread.start()
        inner_started.wait(5)
    assert not gc.isenabled()  # the other thread's pause still holds
    outer_may_end.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_the_application_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with collector_paused(BULK):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_inside_still_resumes_the_collector() -> None:
    try:
        with collector_paused(BULK):
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_what_a_bulk_decode_made_goes_to_the_oldest_generation() -> None:
    thresholds = gc.get_threshold()
    gc.set_threshold(1_000_000)  # no young collection may move them meanwhile
    try:
        with collector_paused(BULK):
            made = [[n] for n in range(1_000)]
        oldest = gc.get_objects(generation=2)
    finally:
        gc.set_threshold(*thresholds)
    assert any(item is made[0] for item in oldest) and any(item is made[-1] for item in oldest)
    assert gc.get_freeze_count() == 0


def test_objects_the_application_froze_stay_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pause never unfreezes (nor refreezes) them. Asked of the calls, not of the count:
    a frozen object any other thread of the process frees meanwhile lowers the count."""
    gc.freeze()
    try:
        calls: list[str] = []
        for name in ("freeze", "unfreeze"):
            monkeypatch.setattr(gc, name, functools.partial(calls.append, name))
        with collector_paused(BULK):
            pass
        assert calls == [] and gc.get_freeze_count() > 0
    finally:
        monkeypatch.undo()
        gc.unfreeze()


def test_the_frozen_generation_is_never_walked_once_something_is_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``gc.get_freeze_count`` walks every frozen object (CPython 3.11): it was a third of a
    served request's CPU when each bulk read asked it."""
    freeze_startup_heap()
    assert _freeze_counts_of_three_pauses(monkeypatch) == 0
    assert gc.get_freeze_count() > 0  # still frozen


def test_objects_frozen_by_the_application_are_counted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.freeze()
    assert _freeze_counts_of_three_pauses(monkeypatch) == 1


def _freeze_counts_of_three_pauses(monkeypatch: pytest.MonkeyPatch) -> int:
    """How often three bulk pauses in a row count the frozen objects."""
    counted: list[int] = []
    monkeypatch.setattr(gc, "get_freeze_count", _counting(gc.get_freeze_count, counted))
    for _ in range(3):
        with collector_paused(BULK):
            pass
    return len(counted)


async def test_a_short_read_of_a_large_page_leaves_the_collector_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pause is for the records a read returns, not for the page size it asked for."""
    async with await SqliteStore.open(tmp_path) as store:
        key = SessionKey("agent", "instance", "default")
        conversation, _ = await store.ensure_conversation(
            key, conversation_id="c1", created_at=datetime.now(UTC)
        )
        await store.append(
            conversation.id,
            [RecordDraft(UserMessage(body="hi"))],
            expected_seq=1,
            fence=0,
        )
        paused: list[int] = []
        real = gc.disable
        monkeypatch.setattr(gc, "disable", _counting(real, paused))
        assert len(await store.read(conversation.id, after_seq=0, limit=5000)) == 2
        assert paused == []


def _counting(function: Callable[[], T], calls: list[int]) -> Callable[[], T]:
    def counted() -> T:
        calls.append(1)
        return function()

    return counted
