"""Webhook signatures: the one HMAC rule both directions use (a hex HMAC of the bytes
signed, compared in constant time), and Tether's own outbound header, shaped like Stripe's:
``Tether-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``.

The inbound webhooks (``tether.http.webhooks``) check a provider's signature with
:func:`hmac_hex`; the outbound ones (``tether.engine``) sign with :func:`signature_header`;
a receiver checks them with :func:`verify_signature` (``from tether import verify_signature``).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Sequence
from typing import Final

__all__ = (
    "DEFAULT_TOLERANCE",
    "SIGNATURE_HEADER",
    "hmac_hex",
    "matches",
    "secrets_of",
    "signature_header",
    "verify_signature",
)

SIGNATURE_HEADER: Final = "Tether-Signature"
"""The header an outbound delivery carries its signature in."""

DEFAULT_TOLERANCE: Final = 300.0
"""How far (seconds) a signature's timestamp may be from the receiver's clock by default."""

_SCHEME: Final = "v1"


def hmac_hex(secret: bytes, message: bytes, digest: str = "sha256") -> str:
    """The hex HMAC of ``message`` under ``secret`` (``digest``: a ``hashlib`` name)."""
    return hmac.new(secret, message, digest).hexdigest()


def matches(given: str, message: bytes, secrets: Sequence[bytes], digest: str = "sha256") -> bool:
    """Whether ``given`` (hex, any case) is the HMAC of ``message`` by one of ``secrets``
    (several while one is rotated). Every secret is tried, each in constant time."""
    signature = given.strip().lower().encode()
    valid = False
    for secret in secrets:
        valid |= hmac.compare_digest(hmac_hex(secret, message, digest).encode(), signature)
    return valid


def secrets_of(secret: str | bytes | Sequence[str | bytes]) -> tuple[bytes, ...]:
    """The secret(s) as bytes; ``ValueError`` for none or an empty one (an empty key would
    let anyone sign)."""
    given = [secret] if isinstance(secret, str | bytes) else list(secret)
    keys = tuple(s.encode() if isinstance(s, str) else bytes(s) for s in given)
    if not keys or any(not key.strip() for key in keys):
        raise ValueError("a webhook needs a non-empty secret")
    return keys


def signature_header(body: bytes, secret: str | bytes, *, timestamp: int) -> str:
    """The ``Tether-Signature`` value for ``body`` sent at ``timestamp`` (unix seconds).

    Example::

        headers = {"Tether-Signature": signature_header(body, secret, timestamp=1765000000)}
    """
    (key,) = secrets_of(secret)
    signed = f"{timestamp}.".encode() + body
    return f"t={timestamp},{_SCHEME}={hmac_hex(key, signed)}"


def verify_signature(
    body: bytes,
    header: str,
    secret: str | bytes | Sequence[str | bytes],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> bool:
    """Whether ``header`` (a delivery's ``Tether-Signature``) signs the raw ``body`` with
    ``secret`` (or one of several, while it is rotated), at a timestamp no more than
    ``tolerance`` seconds from ``now`` (default: this machine's clock), which refuses a
    delivery replayed later. Check it before reading the body; the delivery's
    ``Tether-Delivery`` header is its idempotency key.

    Example::

        from tether import verify_signature

        @app.post("/hooks/tether")
        async def hook(request: Request) -> Response:
            body = await request.body()
            if not verify_signature(body, request.headers.get("Tether-Signature", ""),
                                    os.environ["TETHER_WEBHOOK_SECRET"]):
                return Response(status_code=400)
            ...
    """
    keys = secrets_of(secret)
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        fields.setdefault(name, []).append(value)
    stamps = fields.get("t", [])
    if len(stamps) != 1 or not stamps[0].isdigit() or len(stamps[0]) > 12:
        return False
    timestamp = int(stamps[0])
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance:
        return False
    signed = f"{timestamp}.".encode() + body
    valid = False
    for given in fields.get(_SCHEME, []):
        valid |= matches(given, signed, keys)
    return valid
