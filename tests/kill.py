"""Kill a writing process at a random moment, knowing what it had acknowledged."""

import random
import subprocess
from collections.abc import Iterator

from .processes import kill, start

__all__ = ("kill_after", "killed_repeatedly")


def kill_after(command: list[str], acknowledgements: int) -> int:
    """Run ``command``, a worker that prints an integer once each of its writes returned, read
    ``acknowledgements`` of them, SIGKILL it, and return the highest it printed (those that
    reached the pipe before the kill included): what the store must still hold."""
    process = start(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    printed = [0]
    try:
        for _ in range(acknowledgements):
            line = process.stdout.readline()
            assert line, "the worker stopped writing"
            printed.append(int(line))
        process.kill()
        rest = process.stdout.read()  # what reached the pipe before the kill
    finally:
        kill(process)
    return max(printed + [int(value) for value in rest.split()])


def killed_repeatedly(
    command: list[str], *, seed: int, acknowledgements: tuple[int, int], rounds: int = 3
) -> Iterator[int]:
    """Run and kill ``command`` ``rounds`` times, each after a random number (within
    ``acknowledgements``) of acknowledged writes; after each kill, yield the highest write
    acknowledged so far, for the test to check the store against before the next round."""
    rng = random.Random(seed)
    acknowledged = 0
    for _ in range(rounds):
        acknowledged = max(acknowledged, kill_after(command, rng.randint(*acknowledgements)))
        yield acknowledged
