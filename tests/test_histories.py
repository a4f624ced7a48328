"""HistoryMemo: work over a growing history, resumed from the very same objects."""

from concurrent.futures import ThreadPoolExecutor

from tether._histories import HistoryMemo


class Item:
    """A message stand-in: compared by identity, as the memo compares."""


def test_a_longer_history_of_the_same_objects_resumes() -> None:
    memo: HistoryMemo[str] = HistoryMemo(entries=4, messages=100)
    history = [Item() for _ in range(5)]
    memo.remember("k", history[:3], "three")
    assert memo.resumable("k", history) == (3, "three")
    assert memo.resumable("k", history[:3]) == (3, "three")
    assert memo.resumable("k", history[:2]) is None  # shorter than what it covered
    assert memo.resumable("other", history) is None


def test_the_first_item_is_the_keys_to_compare_and_the_rest_by_identity() -> None:
    memo: HistoryMemo[str] = HistoryMemo(entries=4, messages=100)
    history = [Item() for _ in range(4)]
    memo.remember("k", history, "four")
    assert memo.resumable("k", [Item(), *history[1:]]) == (4, "four")
    rebuilt = [*history[:2], Item(), history[3]]
    assert memo.resumable("k", rebuilt) is None


def test_entries_are_bounded_by_count_and_by_the_items_they_hold() -> None:
    memo: HistoryMemo[int] = HistoryMemo(entries=3, messages=10)
    for n in range(6):
        memo.remember(n, [Item() for _ in range(2)], n)
    assert memo.entries_held() == [2, 2, 2]
    memo.remember("long", [Item() for _ in range(8)], 0)
    assert memo.held == sum(memo.entries_held()) <= 10
    memo.remember("longer", [Item() for _ in range(30)], 0)  # the newest stays, whatever its size
    assert memo.entries_held() == [30]
    assert memo.held == 30


def test_threads_may_share_a_memo() -> None:
    memo: HistoryMemo[int] = HistoryMemo(entries=2, messages=50)
    history = [Item() for _ in range(40)]

    def grow(offset: int) -> bool:
        ok = True
        for n in range(1, len(history)):
            known = memo.resumable(offset % 3, history[:n])
            ok = ok and (known is None or known[1] <= n)
            memo.remember(offset % 3, history[:n], n)
        return ok

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(grow, range(8)))
