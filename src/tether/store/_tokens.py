"""API tokens in the store (the ``tokens`` capability): what an operator issued to a person
or a program, kept by the digest of its secret (the secret itself is never stored), with the
identity it stands for, its expiry and its revocation.

The store does not interpret scopes, tenants or agents: ``tether.auth`` issues tokens
(``issue_token``) and turns a presented one into an identity (``StoredTokens``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

from tether._canonical import canonical_json
from tether.store._common import from_micros, to_micros

__all__ = (
    "TOKEN_COLUMNS",
    "NewToken",
    "TokenRow",
    "check_new_token",
    "names_json",
    "stored_time",
    "token_of",
    "token_values",
)

TOKEN_COLUMNS: Final = (
    "id, digest, subject, tenant, scopes, agents, display, created_at, expires_at, revoked_at"
)
"""The columns of a token row, in :func:`token_of`'s order (SQLite and PostgreSQL)."""

_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class NewToken:
    """A token to keep (``TokenStore.put_token``): its public ``id``, the ``digest`` of its
    secret (lowercase hex SHA-256), the identity it stands for (``subject``, ``tenant``,
    ``scopes``, ``agents``: ``None`` for every agent, ``display``), when it was issued and
    when it expires (``None``: never).

    Example::

        new = NewToken(id="tok_01J...", digest=hashlib.sha256(secret).hexdigest(),
                       subject="support-1", created_at=utc_now(), tenant="acme",
                       scopes=("approvals:decide",))
    """

    id: str
    digest: str
    subject: str
    created_at: datetime
    tenant: str | None = None
    scopes: tuple[str, ...] = ()
    agents: tuple[str, ...] | None = None
    display: str | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class TokenRow:
    """A kept token: what :class:`NewToken` said (times in UTC), and when it was revoked
    (``None``: it was not)."""

    id: str
    digest: str
    subject: str
    tenant: str | None
    scopes: tuple[str, ...]
    agents: tuple[str, ...] | None
    display: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None = None

    def expired(self, now: datetime) -> bool:
        """Whether the token has expired at ``now`` (its expiry is the first instant it no
        longer holds)."""
        return self.expires_at is not None and now >= self.expires_at


def _text(value: object, what: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        raise ValueError(f"a token's {what} is a non-empty string, not {value!r}")


def _names(value: object, what: str) -> None:
    if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"a token's {what} are a tuple of non-empty strings, not {value!r}")


def check_new_token(new: NewToken) -> TokenRow:
    """``new`` as the row a store keeps (times to the microsecond, in UTC), or
    ``ValueError`` saying what is malformed: every backend checks before it writes."""
    _text(new.id, "id")
    if not isinstance(new.digest, str) or not _DIGEST.fullmatch(new.digest):
        raise ValueError(f"a token's digest is 64 lowercase hex digits, not {new.digest!r}")
    _text(new.subject, "subject")
    _text(new.tenant, "tenant", optional=True)
    _text(new.display, "display", optional=True)
    _names(new.scopes, "scopes")
    if new.agents is not None:
        _names(new.agents, "agents")
    return TokenRow(
        id=new.id,
        digest=new.digest,
        subject=new.subject,
        tenant=new.tenant,
        scopes=new.scopes,
        agents=new.agents,
        display=new.display,
        created_at=stored_time(new.created_at),
        expires_at=None if new.expires_at is None else stored_time(new.expires_at),
    )


def stored_time(moment: datetime) -> datetime:
    """``moment`` as every backend hands it back: in UTC, to the microsecond (``ValueError``
    if it is naive)."""
    return from_micros(to_micros(moment))


def token_of(row: Sequence[Any], time_of: Callable[[Any], datetime]) -> TokenRow:
    """A stored row (:data:`TOKEN_COLUMNS`) as a :class:`TokenRow`, its times read with
    ``time_of`` (each backend keeps them its own way)."""
    token_id, digest, subject, tenant, scopes, agents, display, created, expires, revoked = row
    return TokenRow(
        id=token_id,
        digest=digest,
        subject=subject,
        tenant=tenant,
        scopes=tuple(orjson.loads(scopes)),
        agents=None if agents is None else tuple(orjson.loads(agents)),
        display=display,
        created_at=time_of(created),
        expires_at=None if expires is None else time_of(expires),
        revoked_at=None if revoked is None else time_of(revoked),
    )


def token_values(row: TokenRow, stored: Callable[[datetime], Any]) -> tuple[Any, ...]:
    """What an insert of ``row`` binds to :data:`TOKEN_COLUMNS` but ``revoked_at`` (a new
    token is not revoked), its times written with ``stored``."""
    return (
        row.id,
        row.digest,
        row.subject,
        row.tenant,
        names_json(row.scopes),
        None if row.agents is None else names_json(row.agents),
        row.display,
        stored(row.created_at),
        None if row.expires_at is None else stored(row.expires_at),
    )


def names_json(names: Sequence[str]) -> bytes:
    """The canonical JSON a SQL store keeps scopes or agents as (an array of strings)."""
    return canonical_json(list(names))
