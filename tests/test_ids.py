"""Ids made on demand: a claim's offer of attempt ids costs only the ones it takes."""

from types import SimpleNamespace
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import _ids
from tether._ids import UlidsOnDemand


def test_ulids_are_made_when_first_read_and_then_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = _ids.new_ulid

    def counting() -> str:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(_ids, "new_ulid", counting)
    ids = UlidsOnDemand(64)
    assert len(ids) == 64 and made == []
    first, second = ids[0], ids[1]
    assert (first, second) == tuple(made) and ids[0] == first
    assert list(zip(["head"], ids, strict=False)) == [("head", first)]
    assert len(made) == 2  # zip stopped after what it needed
    assert ids[-1] == ids[63] and len(set(ids[:])) == 64
    with pytest.raises(IndexError):
        ids[64]


@pytest.mark.parametrize("start", [0, 1_700_000_000_000 - 3, 2**48 - 1030])
def test_the_time_part_is_exact_across_the_cached_digits(
    start: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time's first 8 digits are kept per 1,024 ms: every millisecond still encodes as
    python-ulid encodes it, on both sides of a span's end and back again."""
    from ulid import ULID

    moments = [*range(start, start + 1030), start + 5, start + 1029, start]
    for milliseconds in moments:
        clock = SimpleNamespace(time_ns=lambda ms=milliseconds: ms * 1_000_000 + 999)
        monkeypatch.setattr(_ids, "time", clock)
        assert ULID.from_str(_ids.new_ulid()).milliseconds == milliseconds


@given(st.integers(0, 2**48 - 1))
def test_every_ulid_reads_back_through_python_ulid(milliseconds: int) -> None:
    """The maintained package parses each id to the time it was made at and writes it back
    the same: a standard ULID (benchmarks/handwritten.py times the two makers)."""
    from ulid import ULID

    made = _make_at(milliseconds)
    parsed = ULID.from_str(made)
    assert parsed.milliseconds == milliseconds and str(parsed) == made


def _make_at(milliseconds: int) -> str:
    clock = SimpleNamespace(time_ns=lambda: milliseconds * 1_000_000 + 999)
    with mock.patch.object(_ids, "time", clock):
        return _ids.new_ulid()
