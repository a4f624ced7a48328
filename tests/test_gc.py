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
