"""Conformance cases for the ``attachments`` capability (``AttachmentStore``):
content-addressed blobs."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from tether.errors import AttachmentNotFound
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("AttachmentCases",)


@needs("attachments")
class AttachmentCases(BaseConformance):
    """Keeping attachments."""

    @case
    async def test_attachment_put_get(self, store: CompleteStore, fx: Fixtures) -> None:
        data = b"\x00\x01binary\xff" * 100
        ref = await store.put_attachment(data, media_type="application/octet-stream")
        assert ref.digest == "sha256:" + hashlib.sha256(data).hexdigest()
        assert ref.size == len(data) and ref.media_type == "application/octet-stream"
        assert await store.put_attachment(data, media_type="application/octet-stream") == ref
        assert await store.get_attachment(ref.digest) == (ref, data)
        with pytest.raises(AttachmentNotFound):
            await store.get_attachment("sha256:absent")

    @case
    async def test_attachments_are_idempotent_under_concurrency(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        data = b"same bytes"
        refs = await asyncio.gather(
            *(store.put_attachment(data, media_type="text/plain") for _ in range(8))
        )
        assert len(set(refs)) == 1
        assert (await store.get_attachment(refs[0].digest))[1] == data
