"""Ids made on demand: a claim's offer of attempt ids costs only the ones it takes."""

import pytest

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
