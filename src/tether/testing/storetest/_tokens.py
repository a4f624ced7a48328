"""Conformance cases for the ``tokens`` capability (``TokenStore``): tokens kept by their
digest, found, listed, revoked once."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import datetime, timedelta, timezone

import pytest

from tether.errors import NotFound, TokenExists, TokenNotFound
from tether.store import NewToken, TokenRow
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("TokenCases",)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _new(fx: Fixtures, token_id: str, **fields: object) -> NewToken:
    given: dict[str, object] = {
        "id": token_id,
        "digest": _digest(token_id),
        "subject": "support-1",
        "created_at": fx.at(0),
        "tenant": "acme",
        "scopes": ("sessions:read", "approvals:decide"),
        **fields,
    }
    return NewToken(**given)  # type: ignore[arg-type]


@needs("tokens")
class TokenCases(BaseConformance):
    @case
    async def test_a_kept_token_is_found_by_its_digest(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``put_token`` keeps every field (times in UTC) and hands back the row
        ``find_token`` then reads; an unknown digest finds nothing."""
        plus_two = timezone(timedelta(hours=2))
        issued = datetime(2026, 1, 1, 2, 0, 0, 123456, tzinfo=plus_two)
        new = _new(
            fx,
            "tok_a",
            agents=("assistant", "triage"),
            display="Support, Ünïcode",
            created_at=issued,
            expires_at=issued + timedelta(days=30),
        )
        kept = await store.put_token(new)
        assert kept == TokenRow(
            id="tok_a",
            digest=_digest("tok_a"),
            subject="support-1",
            tenant="acme",
            scopes=("sessions:read", "approvals:decide"),
            agents=("assistant", "triage"),
            display="Support, Ünïcode",
            created_at=fx.at(0) + timedelta(microseconds=123456),
            expires_at=fx.at(0) + timedelta(days=30, microseconds=123456),
            revoked_at=None,
        )
        assert kept.created_at.utcoffset() == timedelta(0)
        assert await store.find_token(_digest("tok_a")) == kept
        assert await store.find_token(_digest("absent")) is None
        assert await store.list_tokens() == [kept]

    @case
    async def test_what_is_absent_stays_absent(self, store: CompleteStore, fx: Fixtures) -> None:
        """No tenant, no display, no expiry and ``agents=None`` (every agent) read back as
        ``None``; no agents at all (``()``) and no scopes stay empty, not ``None``."""
        every = await store.put_token(_new(fx, "tok_a", tenant=None, scopes=()))
        none = await store.put_token(_new(fx, "tok_b", agents=()))
        found = await store.find_token(every.digest)
        assert found is not None
        assert (found.tenant, found.agents, found.display, found.expires_at) == (None,) * 4
        assert found.scopes == ()
        assert await store.find_token(none.digest) == none and none.agents == ()

    @case
    async def test_a_taken_id_or_digest_is_refused(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A second token with a kept id, or a kept digest, is ``TokenExists`` saying which
        is taken; nothing is written."""
        kept = await store.put_token(_new(fx, "tok_a"))
        with pytest.raises(TokenExists) as same_id:
            await store.put_token(_new(fx, "tok_a", digest=_digest("other"), subject="x"))
        assert (same_id.value.token_id, same_id.value.taken) == ("tok_a", "id")
        assert same_id.value.code == "token_exists"
        with pytest.raises(TokenExists) as same_digest:
            await store.put_token(_new(fx, "tok_b", digest=kept.digest))
        assert (same_digest.value.token_id, same_digest.value.taken) == ("tok_b", "digest")
        assert await store.list_tokens(include_revoked=True) == [kept]
        assert await store.find_token(_digest("other")) is None

    @case
    async def test_a_malformed_token_is_a_value_error(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """An empty id or subject, a digest that is not 64 lowercase hex digits, scopes
        that are not a tuple of strings, an empty tenant or a naive time: ``ValueError``,
        nothing written."""
        bad: list[dict[str, object]] = [
            {"id": ""},
            {"subject": ""},
            {"digest": "abc"},
            {"digest": _digest("x").upper()},
            {"scopes": ["sessions:read"]},
            {"scopes": ("",)},
            {"agents": "assistant"},
            {"tenant": ""},
            {"created_at": datetime(2026, 1, 1)},
            {"expires_at": datetime(2026, 1, 1)},
        ]
        for fields in bad:
            with pytest.raises(ValueError):
                await store.put_token(_new(fx, "tok_bad", **fields))
        assert await store.list_tokens(include_revoked=True) == []

    @case
    async def test_tokens_are_listed_by_id_and_filtered(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """By id (code points), of a subject, of a tenant; revoked ones only when asked."""
        b = await store.put_token(_new(fx, "tok_b", subject="bot", tenant="globex"))
        a = await store.put_token(_new(fx, "tok_a"))
        c = await store.put_token(_new(fx, "tok_c", tenant=None))
        upper = await store.put_token(_new(fx, "Tok_Z"))
        assert await store.list_tokens() == [upper, a, b, c]
        assert await store.list_tokens(subject="support-1") == [upper, a, c]
        assert await store.list_tokens(tenant="acme") == [upper, a]
        assert await store.list_tokens(subject="bot", tenant="acme") == []
        revoked = await store.revoke_token("tok_a", now=fx.at(5))
        assert await store.list_tokens() == [upper, b, c]
        assert await store.list_tokens(include_revoked=True) == [upper, revoked, b, c]
        assert await store.list_tokens(tenant="acme", include_revoked=True) == [upper, revoked]

    @case
    async def test_a_revocation_is_kept_once(self, store: CompleteStore, fx: Fixtures) -> None:
        """``revoke_token`` stamps ``revoked_at``; again, it keeps the first time. The
        revoked token is still found by its digest (the authenticator says it is revoked).
        An unknown id is ``TokenNotFound``, a ``NotFound``."""
        kept = await store.put_token(_new(fx, "tok_a", expires_at=fx.at(100)))
        revoked = await store.revoke_token("tok_a", now=fx.at(5))
        assert revoked == dataclasses.replace(kept, revoked_at=fx.at(5))
        assert await store.revoke_token("tok_a", now=fx.at(9)) == revoked
        assert await store.find_token(kept.digest) == revoked
        with pytest.raises(TokenNotFound) as unknown:
            await store.revoke_token("tok_absent", now=fx.at(5))
        assert isinstance(unknown.value, NotFound) and unknown.value.token_id == "tok_absent"
        assert unknown.value.code == "token_not_found"
        with pytest.raises(ValueError):
            await store.revoke_token("tok_a", now=datetime(2026, 1, 1))
