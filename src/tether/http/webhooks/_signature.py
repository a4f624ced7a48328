"""Checking a webhook delivery's HMAC signature, in constant time, before anything is read."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ("GITHUB", "HmacScheme", "secrets_of")


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
        signature = given[len(self.prefix) :].strip().lower().encode()
        valid = False
        for secret in secrets:
            expected = hmac.new(secret, body, self.digest).hexdigest().encode()
            valid |= hmac.compare_digest(expected, signature)
        return valid


GITHUB = HmacScheme(header="X-Hub-Signature-256", prefix="sha256=", digest="sha256")
"""GitHub's: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``."""


def secrets_of(secret: str | bytes | Sequence[str | bytes]) -> tuple[bytes, ...]:
    """The secret(s) as bytes; ``ValueError`` for none or an empty one (an empty key would
    let anyone sign)."""
    given = [secret] if isinstance(secret, str | bytes) else list(secret)
    keys = tuple(s.encode() if isinstance(s, str) else bytes(s) for s in given)
    if not keys or any(not key.strip() for key in keys):
        raise ValueError("a webhook needs a non-empty secret")
    return keys
