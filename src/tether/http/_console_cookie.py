"""The console's sign-in cookie (docs/console.md): issued by ``POST /ui/login``, taken by the
Guard instead of the bearer token, revoked by ``POST /ui/logout``.

Its value is ``<issued>.<id>.<mac>``: the time it was issued (Unix seconds), a random id
(128 bits, hex), and an HMAC-SHA256 of both keyed by a key derived from the server's token.
So it holds no secret and reveals none (it is no bearer token), any server started with the
token takes it (a restart or another API node on the same store), it lasts ``lifetime``
seconds from its issue whatever the browser keeps, and sign-out revokes its id in the store
(``Runtime.revoke``), where every server on the store finds it, restarts included.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from tether.auth import Identity
from tether.engine import Runtime

__all__ = ("COOKIE", "DEFAULT_LIFETIME", "MAX_CREDENTIAL", "ConsoleCookies", "request_cookie")

COOKIE = "tether_console"
MAX_CREDENTIAL = 8192
"""The longest credential the console signs in with (a JWT with many claims fits)."""
DEFAULT_LIFETIME = 12 * 3600.0
"""Seconds a sign-in lasts: a working day."""
_LABEL = b"tether console session v2"
_SKEW = 300
"""Seconds a cookie's issue time may lie ahead of this server's clock (another node's)."""


def request_cookie(header: str) -> str | None:
    """The console cookie's value in a ``Cookie`` header, if there is one."""
    for pair in header.split(";"):
        name, equals, value = pair.strip().partition("=")
        if equals and name == COOKIE:
            return value.strip().strip('"')
    return None


class ConsoleCookies:
    """Issues, checks and revokes the console's cookies for a server started with ``token``,
    whose holder is ``identity``.

    Example::

        cookies = ConsoleCookies(b"s3cret", runtime, identity=Identity("token"), lifetime=3600)
        value = cookies.issue()
        assert await cookies.identity(value) == Identity("token")
        await cookies.revoke(value)
    """

    def __init__(
        self,
        token: bytes,
        runtime: Runtime,
        *,
        identity: Identity,
        lifetime: float = DEFAULT_LIFETIME,
    ):
        if not lifetime > 0:
            raise ValueError(f"a sign-in lifetime is a positive number of seconds: {lifetime}")
        self._key = hmac.new(token, _LABEL, hashlib.sha256).digest()
        self._runtime = runtime
        self._identity = identity
        self.lifetime = lifetime

    def _now(self) -> float:
        return self._runtime.clock.now().timestamp()

    def _mac(self, signed: str) -> str:
        return hmac.new(self._key, signed.encode(), hashlib.sha256).hexdigest()

    def issue(self) -> str:
        """A new cookie's value, issued now."""
        signed = f"{int(self._now())}.{secrets.token_hex(16)}"
        return f"{signed}.{self._mac(signed)}"

    def _signed(self, value: str) -> tuple[str, float] | None:
        """The id of a cookie this server issued and the seconds it has left, or ``None``
        if it did not issue it or it has expired."""
        signed, _, mac = value.rpartition(".")
        issued, _, cookie_id = signed.partition(".")
        if not (issued.isascii() and issued.isdigit() and len(cookie_id) == 32):
            return None
        if not hmac.compare_digest(mac.encode("latin-1"), self._mac(signed).encode()):
            return None
        age = self._now() - int(issued)
        return (cookie_id, self.lifetime - age) if -_SKEW <= age < self.lifetime else None

    async def seconds_left(self, value: str) -> float | None:
        """How long the cookie lasts yet: ``None`` unless this server issued it (its token),
        it has not expired, and it was not signed out (one read of the store)."""
        signed = self._signed(value)
        if signed is None or await self._runtime.is_revoked(_revocation(signed[0])):
            return None
        return signed[1]

    async def valid(self, value: str) -> bool:
        """Issued by this server (its token), not expired, and not signed out."""
        return await self.seconds_left(value) is not None

    async def identity(self, value: str) -> Identity | None:
        """Who the cookie signs in, if it is :meth:`valid`."""
        return self._identity if await self.valid(value) else None

    async def revoke(self, value: str) -> None:
        """Sign the cookie out for good; a value this server never issued, or one that has
        expired already, is left alone (nothing is written for it)."""
        signed = self._signed(value)
        if signed is not None:
            await self._runtime.revoke(_revocation(signed[0]))


def _revocation(cookie_id: str) -> str:
    """The id a cookie is revoked by, among the credentials an application may revoke."""
    return f"console:{cookie_id}"
