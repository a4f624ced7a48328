"""Tokens kept in the store (issue 39): ``issue_token`` shows a secret once and keeps its
digest; ``StoredTokens`` answers every outcome of a presented one, on a fixed clock."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

import pytest
from starlette.requests import HTTPConnection

from tether.auth import Identity, IssuedToken, StoredTokens, issue_token
from tether.auth._tokens import token_digest
from tether.errors import Unauthenticated
from tether.store import MemoryStore, NewToken

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def request(authorization: str | None) -> HTTPConnection:
    headers = [] if authorization is None else [(b"authorization", authorization.encode())]
    return HTTPConnection({"type": "http", "headers": headers})


class Clock:
    def __init__(self) -> None:
        self.at = NOW

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


async def test_an_issued_token_is_shown_once_and_kept_by_its_digest(store: MemoryStore) -> None:
    issued = await issue_token(
        store,
        subject="support-1",
        tenant="acme",
        scopes=["approvals:decide", "sessions:read", "approvals:decide"],
        agents=["triage", "assistant"],
        display="Support One",
        expires_at=NOW + timedelta(days=30),
        now=NOW,
    )
    assert re.fullmatch(r"tether_[A-Za-z0-9_-]{43}", issued.token)
    assert re.fullmatch(r"tok_[0-9A-Z]{26}", issued.row.id)
    assert issued.token not in repr(issued)
    row = issued.row
    assert row.digest == hashlib.sha256(issued.token.encode()).hexdigest()
    assert (row.subject, row.tenant, row.display) == ("support-1", "acme", "Support One")
    assert row.scopes == ("sessions:read", "approvals:decide")  # the docs' order, once each
    assert row.agents == ("assistant", "triage")
    assert (row.created_at, row.expires_at, row.revoked_at) == (NOW, NOW + timedelta(30), None)
    assert await store.list_tokens() == [row]
    stored = repr(await store.list_tokens())
    assert issued.token not in stored and issued.token[len("tether_") :] not in stored
    other = await issue_token(store, subject="support-1", scopes=["admin"], now=NOW)
    assert other.token != issued.token and other.row.id != row.id


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scopes": ["sessions:read", "sessions:delete"]}, "no scope 'sessions:delete'"),
        ({"subject": ""}, "subject"),
        ({"tenant": ""}, "tenant"),
        ({"agents": ["assistant", ""]}, "agent name"),
        ({"expires_at": NOW}, "not after now"),
        ({"expires_at": datetime(2027, 1, 1)}, "timezone-aware"),
    ],
)
async def test_a_bad_token_is_refused_before_anything_is_written(
    store: MemoryStore, fields: dict[str, object], message: str
) -> None:
    given: dict[str, object] = {"subject": "support-1", "scopes": ["sessions:read"], **fields}
    with pytest.raises(ValueError, match=re.escape(message)):
        await issue_token(store, now=NOW, **given)  # type: ignore[arg-type]
    assert await store.list_tokens(include_revoked=True) == []


async def _issued(store: MemoryStore, **fields: object) -> IssuedToken:
    given: dict[str, object] = {
        "subject": "support-1",
        "tenant": "acme",
        "scopes": ["sessions:read", "approvals:decide"],
        "agents": ["assistant"],
        "display": "Support One",
        **fields,
    }
    return await issue_token(store, now=NOW, **given)  # type: ignore[arg-type]


async def test_a_valid_token_is_the_identity_it_was_issued_for(store: MemoryStore) -> None:
    issued = await _issued(store, expires_at=NOW + timedelta(hours=1))
    authenticate = StoredTokens(store, now=Clock())
    identity = await authenticate(request(f"Bearer {issued.token}"))
    assert identity == Identity(
        "support-1",
        tenant="acme",
        scopes=frozenset({"sessions:read", "approvals:decide"}),
        agents=frozenset({"assistant"}),
        display="Support One",
    )
    assert await authenticate(request(f"bearer   {issued.token}  ")) == identity
    everyone = await issue_token(store, subject="ops", scopes=["admin"], now=NOW)
    operator = await authenticate(request(f"Bearer {everyone.token}"))
    assert operator == Identity("ops", tenant=None, scopes=frozenset({"admin"}), agents=None)


async def test_no_bearer_is_no_identity(store: MemoryStore) -> None:
    authenticate = StoredTokens(store, now=Clock())
    assert await authenticate(request(None)) is None
    assert await authenticate(request("Basic dXNlcjpwYXNz")) is None
    assert await authenticate(request("Bearer ")) is None


@pytest.mark.parametrize(
    "credential",
    ["s3cret", "tether_short", "tether_" + "a" * 44, "tok_" + "a" * 43, "tether_" + "!" * 43],
)
async def test_a_bearer_that_is_no_tether_token_is_refused(
    store: MemoryStore, credential: str
) -> None:
    with pytest.raises(Unauthenticated, match=r"^not a Tether token$"):
        await StoredTokens(store, now=Clock())(request(f"Bearer {credential}"))


async def test_an_unknown_token_is_refused(store: MemoryStore) -> None:
    await _issued(store)
    forged = "tether_" + "A" * 43
    with pytest.raises(Unauthenticated, match=r"^unknown token$") as refused:
        await StoredTokens(store, now=Clock())(request(f"Bearer {forged}"))
    assert forged not in str(refused.value)


async def test_a_revoked_token_is_refused(store: MemoryStore) -> None:
    issued = await _issued(store)
    authenticate = StoredTokens(store, now=Clock())
    assert await authenticate(request(f"Bearer {issued.token}")) is not None
    await store.revoke_token(issued.row.id, now=NOW + timedelta(minutes=1))
    with pytest.raises(Unauthenticated, match=r"^token revoked$"):
        await authenticate(request(f"Bearer {issued.token}"))


async def test_a_token_expires_at_its_expiry(store: MemoryStore) -> None:
    expiry = NOW + timedelta(days=1)
    issued = await _issued(store, expires_at=expiry)
    clock = Clock()
    authenticate = StoredTokens(store, now=clock)
    clock.at = expiry - timedelta(microseconds=1)
    assert await authenticate(request(f"Bearer {issued.token}")) is not None
    clock.at = expiry
    with pytest.raises(Unauthenticated, match=r"^token expired$"):
        await authenticate(request(f"Bearer {issued.token}"))


async def test_a_revoked_token_says_revoked_even_once_expired(store: MemoryStore) -> None:
    issued = await _issued(store, expires_at=NOW + timedelta(seconds=1))
    await store.revoke_token(issued.row.id, now=NOW)
    clock = Clock()
    clock.at = NOW + timedelta(days=1)
    with pytest.raises(Unauthenticated, match=r"^token revoked$"):
        await StoredTokens(store, now=clock)(request(f"Bearer {issued.token}"))


async def test_a_scope_this_tether_does_not_know_grants_nothing(store: MemoryStore) -> None:
    token = "tether_" + "B" * 43
    await store.put_token(
        NewToken(
            id="tok_later",
            digest=token_digest(token),
            subject="bot",
            created_at=NOW,
            scopes=("sessions:read", "sessions:teleport"),
        )
    )
    identity = await StoredTokens(store, now=Clock())(request(f"Bearer {token}"))
    assert identity is not None and identity.scopes == frozenset({"sessions:read"})


async def test_the_default_clock_is_now() -> None:
    async with MemoryStore() as store:
        past = await issue_token(
            store,
            subject="s",
            scopes=["sessions:read"],
            expires_at=datetime(2000, 1, 2, tzinfo=UTC),
            now=datetime(2000, 1, 1, tzinfo=UTC),
        )
        with pytest.raises(Unauthenticated, match=r"^token expired$"):
            await StoredTokens(store)(request(f"Bearer {past.token}"))
