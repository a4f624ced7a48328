"""The collector pause around bulk decodes: bounded, counted, and polite to the application."""

import gc
import threading

from tether._gc import BULK, collector_paused


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


def test_objects_the_application_froze_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused(BULK):
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
