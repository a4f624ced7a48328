"""The deterministic fake model every system is driven by: zero latency, 300-byte messages,
one tool call per turn.

A conversation of ``turns`` turns is: the user's message, then ``turns`` times an assistant
message (300 bytes of text plus one ``lookup`` tool call) answered by a 300-byte tool result,
then a 300-byte final answer: ``2 * turns + 2`` messages.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from pathlib import Path

__all__ = (
    "TEXT",
    "TurnsResult",
    "messages_in",
    "raw_turn_ms",
    "reply",
    "sqlite_bytes",
    "tool_result",
)

TEXT = "x" * 300
TOOL = "lookup"


def reply(done: int, turns: int) -> tuple[str, int | None]:
    """The model's answer after ``done`` tool results: its text, and the tool argument to call
    (``None``: the final answer)."""
    return TEXT, (done if done < turns else None)


def tool_result(n: int) -> str:
    """The tool's 300-byte answer to ``lookup(n)``."""
    head = f"result {n}: "
    return head + "y" * (300 - len(head))


def messages_in(turns: int) -> int:
    return 2 * turns + 2


def raw_turn_ms(turns: int = 1000) -> float:
    """The fake model plus the fake tool called directly: what a turn costs with no framework."""
    start = time.perf_counter()
    for n in range(turns):
        reply(n, turns)
        tool_result(n)
    return (time.perf_counter() - start) * 1000 / turns


def sqlite_bytes(path: Path) -> int:
    """The size of a SQLite database once its WAL (if any) is checkpointed into it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


class TurnsResult:
    """One system's conversations of ``turns`` turns: wall seconds per conversation, and what
    they left on disk (``disk_bytes`` grown over ``conversations`` conversations)."""

    def __init__(
        self,
        turns: int,
        seconds: list[float],
        disk_bytes: int,
        conversations: int,
        records: int | None = None,
        payload_bytes: int | None = None,
        commits: int | None = None,
    ) -> None:
        self.turns = turns
        self.seconds = seconds
        self.disk_bytes = disk_bytes
        self.conversations = conversations
        self.records = records  # Tether only: log records written
        self.payload_bytes = payload_bytes  # Tether only: the records' encoded bodies
        self.commits = commits  # Tether only: store commits

    @property
    def ms_per_turn(self) -> float:
        return statistics.median(self.seconds) * 1000 / self.turns

    @property
    def bytes_per_message(self) -> float:
        return self.disk_bytes / (self.conversations * messages_in(self.turns))
