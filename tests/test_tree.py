"""The reducer: deterministic, prefix-consistent, compaction re-parents and removes nothing."""

from hypothesis import given
from hypothesis import strategies as st

from tether.records import Compaction, Record, RecordDraft, UserMessage, seal
from tether.tree import reduce


def build(plan: list[int | None]) -> list[Record]:
    """A log from a plan: ``None`` is a message, an int ``k`` a compaction keeping seq ``k``."""
    records: list[Record] = []
    for seq, kept in enumerate(plan, start=1):
        payload = (
            UserMessage(body=str(seq))
            if kept is None
            else Compaction(summary=f"s{seq}", first_kept_seq=kept)
        )
        prev = records[-1].hash if records else ""
        records.append(
            seal(RecordDraft(payload), conversation_id="c", session="d", seq=seq, prev_hash=prev)
        )
    return records


PLANS = st.lists(st.one_of(st.none(), st.none(), st.integers(1, 40)), max_size=40)


def test_linear_log_is_a_chain() -> None:
    tree = reduce(build([None] * 4))
    assert [n.parent for n in tree.nodes] == [None, 1, 2, 3]
    assert tree.active_path == (1, 2, 3, 4) and tree.leaf == 4


def test_compaction_reparents_the_kept_record() -> None:
    # 1..5 messages, 6 compacts keeping 4, then 7 follows the leaf.
    tree = reduce(build([None, None, None, None, None, 4, None]))
    assert tree.parent_of(6) == 3 and tree.parent_of(4) == 6
    assert tree.parent_of(7) == 5
    assert tree.active_path == (6, 4, 5, 7)
    assert [tree.parent_of(s) for s in (1, 2, 3)] == [
        None,
        1,
        2,
    ]  # summarized records stay reachable
    assert [r.seq for r in tree.active_records()] == [6, 4, 5, 7]


def test_nested_compactions_keep_the_latest_summary_first() -> None:
    tree = reduce(build([None, None, None, 2, None, None, 5, None]))
    assert tree.active_path == (7, 5, 6, 8)
    assert tree.parent_of(7) == 3 and tree.parent_of(5) == 7


def test_compaction_keeping_nothing_starts_the_path() -> None:
    tree = reduce(build([None, None, 9, None]))
    assert tree.active_path == (3, 4) and tree.parent_of(3) == 2


@given(PLANS)
def test_reduction_is_deterministic(plan: list[int | None]) -> None:
    records = build(plan)
    assert reduce(records) == reduce(list(records))


@given(PLANS)
def test_reduction_keeps_every_record_in_log_order(plan: list[int | None]) -> None:
    records = build(plan)
    tree = reduce(records)
    assert [n.seq for n in tree.nodes] == [r.seq for r in records]
    assert all(n.parent is None or 1 <= n.parent <= len(records) for n in tree.nodes)


@given(PLANS)
def test_reduction_is_prefix_consistent(plan: list[int | None]) -> None:
    records = build(plan)
    full = reduce(records)
    for n in range(len(records) + 1):
        prefix = reduce(records[:n])
        assert len(prefix.nodes) == n
        assert all(node.parent is None or node.parent <= n for node in prefix.nodes)
        for node in prefix.nodes:
            if node.parent != full.parent_of(node.seq):
                # A parent only changes when a later compaction re-parents it.
                later = [r for r in records[n:] if r.kind == "compaction"]
                assert any(r.payload.first_kept_seq == node.seq for r in later)  # type: ignore[attr-defined]


@given(PLANS)
def test_active_path_is_a_parent_chain_starting_at_the_latest_compaction(
    plan: list[int | None],
) -> None:
    records = build(plan)
    tree = reduce(records)
    path = tree.active_path
    for child, parent in zip(path[1:], path, strict=False):
        assert tree.parent_of(child) == parent
    compactions = [seq for seq in path if records[seq - 1].kind == "compaction"]
    if compactions:  # the newest summary heads the path (it may keep an older one)
        assert path[0] == max(compactions)
