"""Tokens kept in the Tether store: :func:`issue_token` makes one for a person or a program
(``tether tokens create``), and :class:`StoredTokens` is the authenticator that turns a
presented one into the identity it was issued for (``tether serve --auth tokens``).

A token reads ``tether_`` and 43 URL-safe characters (256 random bits), a prefix secret
scanners can recognise. The store keeps only the SHA-256 digest of the whole text, with the
identity, the expiry and the revocation: whoever reads the store cannot present a token.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from starlette.requests import HTTPConnection

from tether._ids import new_ulid
from tether.auth._authenticate import bearer_token
from tether.auth._identity import ALL_SCOPES, Identity, check_scopes
from tether.errors import Unauthenticated
from tether.store import NewToken, TokenRow, TokenStore

__all__ = ("TOKEN_PREFIX", "IssuedToken", "StoredTokens", "issue_token", "token_digest")

TOKEN_PREFIX: Final = "tether_"
"""What every token issued here starts with."""
_TOKEN: Final = re.compile(rf"{TOKEN_PREFIX}[A-Za-z0-9_-]{{43}}")
_ID_PREFIX: Final = "tok_"


def token_digest(token: str) -> str:
    """What the store keeps of ``token``: the SHA-256 of its text, in lowercase hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just issued: its secret ``token`` (shown once: the store cannot give it
    back, and it is left out of the ``repr``) and the ``row`` the store keeps."""

    token: str = field(repr=False)
    row: TokenRow


async def issue_token(
    store: TokenStore,
    *,
    subject: str,
    tenant: str | None = None,
    scopes: Iterable[str],
    agents: Iterable[str] | None = None,
    display: str | None = None,
    expires_at: datetime | None = None,
    now: datetime,
) -> IssuedToken:
    """Issue a token for ``subject`` in ``tenant`` (``None``: every tenant) holding
    ``scopes`` for ``agents`` (``None``: every agent), expiring at ``expires_at`` (``None``:
    never); the store keeps its digest under a new id (``tok_`` and a ULID).

    ``ValueError`` (nothing written) for an unknown scope (naming it), an empty subject,
    tenant or agent name, or an expiry not after ``now``.

    Example::

        issued = await issue_token(store, subject="support-1", tenant="acme",
                                   scopes=["approvals:read", "approvals:decide"],
                                   now=datetime.now(UTC))
        print(issued.token)  # once: tether_...
    """
    known = check_scopes(scopes)
    chosen = None if agents is None else tuple(sorted(set(agents)))
    if chosen is not None and not all(isinstance(a, str) and a for a in chosen):
        raise ValueError(f"an agent name is a non-empty string: {chosen!r}")
    # The identity the token will stand for, built now: what it refuses, the token would.
    Identity(
        subject,
        tenant=tenant,
        scopes=known,
        agents=None if chosen is None else frozenset(chosen),
        display=display,
    )
    if now.tzinfo is None or (expires_at is not None and expires_at.tzinfo is None):
        raise ValueError("the times of a token are timezone-aware")
    if expires_at is not None and expires_at <= now:
        raise ValueError(f"the token would expire at {expires_at.isoformat()}, not after now")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = await store.put_token(
        NewToken(
            id=_ID_PREFIX + new_ulid(),
            digest=token_digest(token),
            subject=subject,
            created_at=now,
            tenant=tenant,
            scopes=tuple(scope for scope in ALL_SCOPES if scope in known),
            agents=chosen,
            display=display,
            expires_at=expires_at,
        )
    )
    return IssuedToken(token, row)


class StoredTokens:
    """The authenticator of the tokens kept in ``store`` (:func:`issue_token`): a request
    without a bearer credential is ``None``; a bearer that is not a Tether token, or one
    unknown, revoked or expired at ``now()``, is :class:`~tether.errors.Unauthenticated`
    saying which; a valid one is the identity it was issued for. A scope this Tether does
    not know (one a later version issued) grants nothing.

    Example::

        app = create_app(runtime, authenticate=StoredTokens(store))
    """

    def __init__(self, store: TokenStore, *, now: Callable[[], datetime] = _utc_now) -> None:
        self._store = store
        self._now = now

    async def __call__(self, request: HTTPConnection) -> Identity | None:
        token = bearer_token(request)
        if token is None:
            return None
        if not _TOKEN.fullmatch(token):
            raise Unauthenticated("not a Tether token")
        row = await self._store.find_token(token_digest(token))
        if row is None:
            raise Unauthenticated("unknown token")
        if row.revoked_at is not None:
            raise Unauthenticated("token revoked")
        if row.expired(self._now()):
            raise Unauthenticated("token expired")
        return Identity(
            row.subject,
            tenant=row.tenant,
            scopes=check_scopes(scope for scope in row.scopes if scope in ALL_SCOPES),
            agents=None if row.agents is None else frozenset(row.agents),
            display=row.display,
        )
