"""Store append and read-back throughput, beside raw sqlite3 doing the same work.

    python benchmarks/store_append.py [--rounds 3] [--synchronous FULL]

Prints one table. Every Tether figure has a raw ``sqlite3`` baseline doing the same
inserts into the same schema, on the same disk, at the same ``synchronous`` level, in
the same run; rounds alternate between the two and the table shows medians:

- one record per commit: sequential appends to one conversation vs one INSERT per transaction;
- group commit: 64 conversations appending concurrently (one record per append) vs the
  same rows inserted 64 per transaction by one raw connection (the floor for that work);
- read-back: ``read()`` of a 10k-record conversation vs a raw ``fetchall`` of the same rows.

A second table takes one record per commit apart, in microseconds a commit, at the chosen
``synchronous`` level and at ``OFF`` (no fsync: what is left is CPU): raw sqlite3 writing one
page, raw sqlite3 writing what a Tether append writes (the record, its ``(conversation, seq)``
index entry and its conversation's anchor row, the cache check ``PRAGMA data_version``
first), and Tether's store. The first two differ by the pages and statements Tether's schema
needs; the last two by Tether's Python.

It ends with its goals (issue 26 item 3): one record per commit within 1.3x raw sqlite3's time
(judged from 1,000 records a run), group commit at least 50,000 appends/s with 64
conversations (from 100 appends each), read-back within 2x raw sqlite3's time (from 10,000
records).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from benchmarks._measure import scratch
from benchmarks._table import Goal, judged, print_goals, print_table
from tether.records import RecordDraft, UserMessage
from tether.store import SessionKey, SqliteStore
from tether.store._sqlite_kinds import kind_code
from tether.store._sqlite_log import _MOVE_ANCHOR
from tether.store._sqlite_schema import connect, migrate

BODY = "x" * 300  # a 300-byte message, the size the peers are measured with
NOW = datetime(2026, 1, 1, tzinfo=UTC)
HASH = bytes(32)  # a digest as the store keeps it
INSERT = "INSERT INTO records (conversation, seq, kind, body, hash) VALUES (?, ?, ?, ?, ?)"
KIND = kind_code("user_message")


def _raw_store(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = connect(path, synchronous=synchronous, busy_timeout=5)  # type: ignore[arg-type]
    migrate(conn, 5)  # the very schema the store uses
    return conn


def _row_body(seq: int) -> bytes:
    return b'{"kind":"user_message","payload":{"body":"' + BODY.encode() + b'"},"seq":%d}' % seq


def raw_single(path: Path, count: int, synchronous: str) -> float:
    conn = _raw_store(path, synchronous)
    start = time.perf_counter()
    for seq in range(1, count + 1):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, (1, seq, KIND, _row_body(seq), HASH))  # conversation number 1
        conn.execute("COMMIT")
    rate = count / (time.perf_counter() - start)
    conn.close()
    return rate


def raw_shaped(path: Path, count: int, synchronous: str) -> float:
    """``raw_single`` writing all a Tether append of one record writes, with the same
    statements: the cache check, the record (its row and its index entry), the anchor."""
    conn = _raw_store(path, synchronous)
    conn.execute(
        "INSERT INTO conversations (number, id, agent, instance, session, created_at) "
        "VALUES (1, 'shaped', 'bench', '', 'default', 0)"
    )
    start = time.perf_counter()
    for seq in range(1, count + 1):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("PRAGMA data_version")
        body = _row_body(seq)
        conn.execute(INSERT, (1, seq, KIND, body, HASH))
        conn.execute(_MOVE_ANCHOR, (seq, HASH, seq, len(body), 1))
        conn.execute("COMMIT")
    rate = count / (time.perf_counter() - start)
    conn.close()
    return rate


def raw_grouped(path: Path, writers: int, per_writer: int, synchronous: str) -> float:
    conn = _raw_store(path, synchronous)
    start = time.perf_counter()
    for seq in range(1, per_writer + 1):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            INSERT,
            [(n + 1, seq, KIND, _row_body(seq), HASH) for n in range(writers)],
        )
        conn.execute("COMMIT")
    rate = writers * per_writer / (time.perf_counter() - start)
    conn.close()
    return rate


def raw_read(path: Path, conversation_id: str) -> float:
    conn = sqlite3.connect(path)
    start = time.perf_counter()
    rows = conn.execute(
        "SELECT seq, kind, body, hash FROM records "
        "WHERE conversation = (SELECT number FROM conversations WHERE id = ?) "
        "AND seq > ? ORDER BY seq LIMIT ?",
        (conversation_id, 0, 1_000_000),
    ).fetchall()
    rate = len(rows) / (time.perf_counter() - start)
    conn.close()
    return rate


def _draft() -> RecordDraft:
    return RecordDraft(UserMessage(body=BODY))


async def _conversation(store: SqliteStore, name: str) -> str:
    conversation, _ = await store.ensure_conversation(
        SessionKey("bench", name), conversation_id=name, created_at=NOW
    )
    return conversation.id


async def tether_single(path: Path, count: int, synchronous: str) -> float:
    async with await SqliteStore.open(path, synchronous=synchronous) as store:  # type: ignore[arg-type]
        cid = await _conversation(store, "single")
        start = time.perf_counter()
        for head in range(1, count + 1):
            await store.append(cid, [_draft()], expected_seq=head, fence=0)
        return count / (time.perf_counter() - start)


async def tether_grouped(
    path: Path, writers: int, per_writer: int, synchronous: str
) -> tuple[float, float]:
    async with await SqliteStore.open(path, synchronous=synchronous) as store:  # type: ignore[arg-type]
        ids = [await _conversation(store, f"group-{n}") for n in range(writers)]

        async def writer(cid: str) -> None:
            for head in range(1, per_writer + 1):
                await store.append(cid, [_draft()], expected_seq=head, fence=0)

        commits = store.commits
        start = time.perf_counter()
        await asyncio.gather(*(writer(cid) for cid in ids))
        total = writers * per_writer
        return total / (time.perf_counter() - start), total / (store.commits - commits)


async def tether_read(path: Path, records: int) -> tuple[float, str]:
    async with await SqliteStore.open(path) as store:
        cid = await _conversation(store, "read")
        head = 1
        while head < records:
            batch = [_draft() for _ in range(min(500, records - head))]
            await store.append(cid, batch, expected_seq=head, fence=0)
            head += len(batch)
        await store.read(cid, limit=1_000_000)  # warm the page cache, as the raw read will be
        start = time.perf_counter()
        count = len(await store.read(cid, limit=1_000_000))
        return count / (time.perf_counter() - start), cid


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=1000, help="records per single-writer run")
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--per-writer", type=int, default=150)
    parser.add_argument("--read-records", type=int, default=10_000)
    parser.add_argument("--synchronous", default="FULL", choices=("OFF", "NORMAL", "FULL", "EXTRA"))
    args = parser.parse_args()
    sync = args.synchronous

    figures: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    with scratch() as tmp:
        for round_ in range(args.rounds):
            d = tmp / f"round-{round_}"
            d.mkdir()
            for level in dict.fromkeys((sync, "OFF")):  # the second: CPU only
                at = "" if level == sync else " OFF"
                note("raw single" + at, raw_single(d / f"raw-single{at}.db", args.records, level))
                note("raw shaped" + at, raw_shaped(d / f"shaped{at}.db", args.records, level))
                rate = await tether_single(d / f"single{at}.db", args.records, level)
                note("tether single" + at, rate)
            note(
                "raw grouped", raw_grouped(d / "raw-group.db", args.writers, args.per_writer, sync)
            )
            rate, per_commit = await tether_grouped(
                d / "group.db", args.writers, args.per_writer, sync
            )
            note("tether grouped", rate)
            note("per commit", per_commit)
            rate, cid = await tether_read(d / "read.db", args.read_records)
            note("tether read", rate)
            note("raw read", raw_read(d / "read.db", cid))

    m = {name: statistics.median(values) for name, values in figures.items()}
    single_ratio = m["raw single"] / m["tether single"]
    read_ratio = m["raw read"] / m["tether read"]
    rows = [
        (
            "appends/s, 1 record per commit",
            f"{m['tether single']:,.0f}",
            f"{m['raw single']:,.0f}",
            f"{single_ratio:.2f}x the time",
        ),
        (
            f"appends/s, {args.writers} conversations (group commit)",
            f"{m['tether grouped']:,.0f}",
            f"{m['raw grouped']:,.0f}",
            f"{m['tether grouped'] / m['raw grouped']:.2f}x the rate",
        ),
        (
            f"read-back rows/s ({args.read_records:,} records)",
            f"{m['tether read']:,.0f}",
            f"{m['raw read']:,.0f}",
            f"{read_ratio:.2f}x the time",
        ),
    ]
    print_table(
        f"Tether SQLite store vs raw sqlite3 (synchronous={sync}, 300-byte messages, median of "
        f"{args.rounds} rounds; group commit averaged {m['per commit']:.1f} records per commit)",
        ("metric", "tether", "raw sqlite3", "tether vs raw"),
        rows,
    )
    levels = [(sync, "")] + ([("OFF", " OFF")] if sync != "OFF" else [])
    print_table(
        "One record per commit, taken apart (µs a commit; at OFF nothing is fsynced: CPU only)",
        ("writer", *(f"synchronous={level}" for level, _ in levels)),
        [
            (label, *(f"{1e6 / m[name + at]:,.0f}" for _, at in levels))
            for label, name in (
                ("raw sqlite3, one INSERT (1 page)", "raw single"),
                (
                    "raw sqlite3 writing what Tether writes (record, index entry, anchor row)",
                    "raw shaped",
                ),
                ("Tether's store", "tether single"),
            )
        ],
    )
    print_goals(
        [
            Goal(
                "store append, 1 record per commit, within 1.3x raw sqlite3's time",
                f"{single_ratio:.2f}x ({m['tether single']:,.0f}/s vs {m['raw single']:,.0f}/s)",
                judged(single_ratio <= 1.3, args.records >= 1_000),
            ),
            Goal(
                f"store append, group commit, {args.writers} conversations ≥ 50,000/s",
                f"{m['tether grouped']:,.0f}/s (raw sqlite3 {m['raw grouped']:,.0f}/s)",
                judged(
                    m["tether grouped"] >= 50_000, args.writers >= 64 and args.per_writer >= 100
                ),
            ),
            Goal(
                "store read-back within 2x raw sqlite3's time",
                f"{read_ratio:.2f}x ({args.read_records:,} records)",
                judged(read_ratio <= 2, args.read_records >= 10_000),
            ),
        ]
    )


if __name__ == "__main__":
    asyncio.run(main())
