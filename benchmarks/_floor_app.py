"""The floor of ``benchmarks/http.py``: the least a durable HTTP endpoint does.

    TETHER_FLOOR_DB=/tmp/floor.db python -m uvicorn benchmarks._floor_app:app --port 8000

A FastAPI app with the route ``tether serve`` answers, ``POST /agents/{agent}/{instance}``
(body ``{"body": "..."}``): each request commits one ``INSERT`` into a SQLite file (WAL,
``synchronous=FULL``, the page size and checkpoint interval of Tether's store) and answers
JSON. The endpoint is a plain ``def``, so FastAPI runs it on its thread pool, as a blocking
database call should be; one connection behind a lock takes the commits one at a time (each
request its own transaction, as a naive app would: no group commit).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from fastapi import FastAPI
from pydantic import BaseModel

from tether.store._sqlite_schema import PAGE_SIZE, WAL_AUTOCHECKPOINT_PAGES

__all__ = ("app",)


class Message(BaseModel):
    body: str
    session: str = "default"


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS messages "
        "(id INTEGER PRIMARY KEY, agent TEXT, instance TEXT, session TEXT, body TEXT)"
    )
    return conn


app = FastAPI()
_conn = _connect(Path(os.environ.get("TETHER_FLOOR_DB", "floor.db")))
_lock = threading.Lock()


@app.post("/agents/{agent}/{instance}")
def dispatch(agent: str, instance: str, message: Message) -> dict[str, str]:
    with _lock:
        _conn.execute("BEGIN IMMEDIATE")
        try:
            _conn.execute(
                "INSERT INTO messages (agent, instance, session, body) VALUES (?, ?, ?, ?)",
                (agent, instance, message.session, message.body),
            )
            _conn.execute("COMMIT")
        except BaseException:
            _conn.execute("ROLLBACK")
            raise
    return {"status": "succeeded", "result": f"You said: {message.body}"}


@app.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
