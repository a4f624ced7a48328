"""The order xdist's workers take the tests in: the slowest first, dealt out one per worker.

Under ``--dist worksteal`` (``pyproject.toml``'s ``addopts``) xdist hands each of its N
workers one contiguous share of the collected tests, in order, and an idle worker later steals
half of the longest queue left. A long test that sits late in a share starts late, and the run
ends with one worker busy on it while the others wait. So the tests named in
``tests/slowest.txt`` go to the front of the shares, dealt round-robin (the slowest of all to
the first share, the next to the second, ...), and every other test keeps its collected order
behind them. Every worker collects the same items and so computes the same order, as xdist
requires. Without xdist the order is the same deal with one share: the slowest first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

__all__ = ("SLOWEST", "listed", "shares", "slowest_first")

SLOWEST = Path(__file__).with_name("slowest.txt")


def listed(path: Path = SLOWEST) -> list[str]:
    """The lines of ``path`` that name tests (comments and blank lines left out)."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _workers(config: pytest.Config) -> int:
    """How many shares xdist splits the collection into (1 without xdist)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: the controller says how many there are
        return int(workerinput["workercount"])
    return max(1, int(getattr(config.option, "numprocesses", 0) or 0))


def shares(total: int, workers: int) -> list[int]:
    """The sizes of xdist worksteal's first shares: each idle worker in turn gets the pending
    count divided by the workers still to serve."""
    sizes, left = [], total
    for served in range(workers):
        size = left // (workers - served)
        sizes.append(size)
        left -= size
    return sizes


def slowest_first(config: pytest.Config, items: list[pytest.Item], slowest: Path = SLOWEST) -> None:
    """Reorder ``items`` in place: the tests ``slowest`` names head the workers' shares,
    dealt out."""
    patterns = listed(slowest)

    def rank(item: pytest.Item) -> int | None:
        return next((i for i, p in enumerate(patterns) if p in item.nodeid), None)

    ranked = [(found, item) for item in items if (found := rank(item)) is not None]
    slow = [item for _, item in sorted(ranked, key=lambda entry: entry[0])]  # a stable sort
    if not slow:
        return
    chosen = {id(item) for item in slow}
    rest = iter([item for item in items if id(item) not in chosen])
    workers = _workers(config)
    ordered: list[pytest.Item] = []
    for share, size in enumerate(shares(len(items), workers)):
        head = slow[share::workers]
        ordered += head
        ordered += [item for _, item in zip(range(size - len(head)), rest, strict=False)]
    ordered += rest  # none left unless the slow ones outnumber a share
    items[:] = ordered
