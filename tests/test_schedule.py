"""tests/schedule.py: the slowest tests head xdist's shares, dealt out one per worker."""

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from .schedule import SLOWEST, listed, shares, slowest_first

ROOT = Path(__file__).resolve().parents[1]


def test_the_shares_are_xdists_first_split() -> None:
    assert shares(10, 3) == [3, 3, 4]
    assert shares(2, 3) == [0, 1, 1]
    assert sum(shares(5293, 3)) == 5293


def test_the_slowest_head_each_share_and_the_rest_keep_their_order(tmp_path: Path) -> None:
    slowest = tmp_path / "slowest.txt"
    slowest.write_text("# a comment\nslow_a\n\nslow_b\nslow_c\n")
    names = ["f1", "slow_c", "f2", "f3", "slow_a[x]", "f4", "slow_b", "f5", "f6"]
    items = [cast(pytest.Item, SimpleNamespace(nodeid=name)) for name in names]
    config = cast(pytest.Config, SimpleNamespace(workerinput={"workercount": 3}))
    slowest_first(config, items, slowest)
    # Shares of 3: each starts with one slow test, in the list's order, then the rest.
    assert [item.nodeid for item in items] == [
        *("slow_a[x]", "f1", "f2"),
        *("slow_b", "f3", "f4"),
        *("slow_c", "f5", "f6"),
    ]


def test_every_listed_test_file_exists() -> None:
    """A line naming a file (``path::test``) names one that is still there."""
    files = {line.split("::")[0] for line in listed(SLOWEST) if line.startswith("tests/")}
    missing = sorted(name for name in files if not (ROOT / name).is_file())
    assert not missing, missing
