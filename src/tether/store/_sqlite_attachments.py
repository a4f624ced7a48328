"""The SQL of attachments on SQLite (``AttachmentStore``): content-addressed blobs by digest."""

from __future__ import annotations

import sqlite3

from tether._payloads import AttachmentRef
from tether.errors import AttachmentNotFound
from tether.store._common import attachment_ref

__all__ = ("get_attachment", "put_attachment")


def put_attachment(conn: sqlite3.Connection, data: bytes, media_type: str) -> AttachmentRef:
    ref = attachment_ref(data, media_type)
    conn.execute(
        "INSERT INTO attachments (digest, media_type, size, data) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (digest) DO NOTHING",
        (ref.digest, ref.media_type, ref.size, data),
    )
    return get_attachment(conn, ref.digest)[0]


def get_attachment(conn: sqlite3.Connection, digest: str) -> tuple[AttachmentRef, bytes]:
    row = conn.execute(
        "SELECT media_type, size, data FROM attachments WHERE digest = ?", (digest,)
    ).fetchone()
    if row is None:
        raise AttachmentNotFound(digest)
    return AttachmentRef(digest=digest, media_type=row[0], size=row[1]), bytes(row[2])
