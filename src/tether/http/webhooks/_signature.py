"""Checking a webhook delivery's HMAC signature, in constant time, before anything is read."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tether._signing import matches

__all__ = ("GITHUB", "HmacScheme")


@dataclass(frozen=True, slots=True)
class HmacScheme:
    """Where a provider puts its signature and how it makes it: the header, the text before
    the hex digest, and the hash (``hmac.new(secret, body, digest)`` over the raw body).

    Example::

        STRIPE_LIKE = HmacScheme(header="X-Signature", prefix="", digest="sha256")
    """

    header: str
    prefix: str = ""
    digest: str = "sha256"

    def __post_init__(self) -> None:
        if not self.header.strip():
            raise ValueError("an HMAC scheme needs the header its signature comes in")
        hashlib.new(self.digest)  # an unknown hash fails here, not on the first delivery

    def verify(self, body: bytes, headers: Mapping[str, str], secrets: Sequence[bytes]) -> bool:
        """Whether ``headers`` carry a valid signature of ``body`` by one of ``secrets``
        (several while a secret is rotated). Every secret is tried, in constant time."""
        given = headers.get(self.header.lower(), "")
        if not given.startswith(self.prefix):
            return False
        return matches(given[len(self.prefix) :], body, secrets, self.digest)


GITHUB = HmacScheme(header="X-Hub-Signature-256", prefix="sha256=", digest="sha256")
"""GitHub's: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``."""
