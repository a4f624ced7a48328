"""Revoked credentials: a durable set of ids, kept in the store every process shares.

A revocation is a small marker among the store's attachments, whose bytes are a fixed label
and the credential's id. Attachments are content-addressed, so the marker's digest follows
from the id alone: revoking is one idempotent write, asking is one read by primary key, and
both work on every backend that keeps attachments (a store without them revokes nothing:
``Runtime.revoke`` raises ``StoreCapabilityMissing``) with no table of their own. Nothing
references a marker, so neither erasure nor retention (which remove only what an erased
log referenced) ever takes one away; a marker outlives the credential it names, which is
what revoking means, at some sixty bytes per sign-out.
"""

from __future__ import annotations

import hashlib

from tether.errors import AttachmentNotFound
from tether.store import AttachmentStore

__all__ = ("is_revoked", "revoke")

_LABEL = b"tether revoked credential\n"
_MEDIA_TYPE = "application/vnd.tether.revoked"


def _marker(credential_id: str) -> bytes:
    if not credential_id:
        raise ValueError("a credential id is not empty")
    return _LABEL + credential_id.encode()


async def revoke(store: AttachmentStore, credential_id: str) -> None:
    """Keep ``credential_id`` revoked (again: nothing changes)."""
    await store.put_attachment(_marker(credential_id), media_type=_MEDIA_TYPE)


async def is_revoked(store: AttachmentStore, credential_id: str) -> bool:
    """Whether ``credential_id`` was revoked, by any process on this store, ever."""
    digest = "sha256:" + hashlib.sha256(_marker(credential_id)).hexdigest()
    try:
        await store.get_attachment(digest)
    except AttachmentNotFound:
        return False
    return True
