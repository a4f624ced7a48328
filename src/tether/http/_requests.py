"""The query parameters several routes share (the request bodies are :mod:`tether.wire`'s)."""

from __future__ import annotations

from fastapi import Query

from tether.store import MAX_SEQ

__all__ = (
    "SEQ_AFTER",
    "WAIT_TIMEOUT",
)


# --- shared query parameters -----------------------------------------------------------

WAIT_TIMEOUT = Query(
    default=60.0,
    gt=0,
    le=3600,
    alias="timeout",
    description="Seconds ?wait may hold the request open.",
)
SEQ_AFTER = Query(default=0, ge=0, le=MAX_SEQ, description="Records after this seq.")

# --- request bodies --------------------------------------------------------------------
