"""The conformance suite's state machine is sized by a time budget, not only by a count, and
CI's runs draw the same examples every time."""

import asyncio
from pathlib import Path

from tether.store import MemoryStore, Store
from tether.testing.storetest import run_reference_machine
from tether.testing.storetest._machine import BATCH


class SlowBackend:
    """Opens a reference store slowly, as a remote backend on a loaded machine would."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.opened = 0

    async def __call__(self, directory: Path) -> Store:
        self.opened += 1
        await asyncio.sleep(self.seconds)
        return MemoryStore()


def test_a_slow_backend_runs_fewer_examples_within_the_budget(tmp_path: Path) -> None:
    backend = SlowBackend(0.02)  # a batch alone outlasts the budget
    compared = run_reference_machine(
        backend, tmp_path, examples=1000, steps_per_example=20, seconds=0.01
    )
    assert BATCH <= backend.opened < 2 * BATCH  # the first batch, and no other
    assert compared > 0


def test_without_a_budget_every_example_runs(tmp_path: Path) -> None:
    backend = SlowBackend(0)
    run_reference_machine(backend, tmp_path, examples=BATCH + 5, steps_per_example=5)
    assert backend.opened >= BATCH + 5


def test_a_derandomized_run_draws_the_same_examples_every_time(tmp_path: Path) -> None:
    def compared(directory: Path) -> int:
        return run_reference_machine(
            SlowBackend(0),
            directory,
            examples=2 * BATCH,  # two batches, seeds 0 and 1
            steps_per_example=5,
            seconds=3600,
            derandomize=True,
        )

    assert compared(tmp_path / "first") == compared(tmp_path / "second")
