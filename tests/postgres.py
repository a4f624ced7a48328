"""Where the PostgreSQL tests run: ``TETHER_TEST_POSTGRES_URL``, or the local server.

Each test gets a fresh schema, dropped when the session ends, so runs never see each other's
data. CI gives every run a database of its own and drops it whole at the end
(``TETHER_TEST_POSTGRES_DISPOSABLE=1``): its schemas are left to that one drop.
"""

import os
import uuid

import psycopg
from psycopg import sql

POSTGRES_URL = os.environ.get(
    "TETHER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
_created: list[str] = []


def fresh_schema() -> str:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    _created.append(schema)
    return schema


def store_url(schema: str, **options: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"schema": schema, **options}.items())
    separator = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{separator}{query}"


def postgres_reachable() -> bool:
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=10):
            return True
    except psycopg.Error:
        return False


def drop_schemas() -> None:
    if os.environ.get("TETHER_TEST_POSTGRES_DISPOSABLE"):
        _created.clear()
        return
    if not _created or not postgres_reachable():
        return
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for schema in _created:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    _created.clear()
