"""The JWT bearer authenticator: ``Authorization: Bearer <JWT>`` as an OIDC provider issues
it, verified against the provider's published keys (its JWKS), a PEM public key, or a
shared HMAC secret, and mapped to an :class:`~tether.auth.Identity` (docs/auth.md, "JWT
(OIDC)").

What is checked: the signature, with an algorithm from an explicit allow-list that fits the
key (``none`` never; an HMAC token is never checked against a public key, nor the other way
round); ``exp`` (required), ``nbf`` and ``iat`` with a small leeway; ``aud`` and ``iss``
when configured (configure both: a token some other application of the same provider was
given is otherwise good here too); ``sub`` (required). Keys a token points at by URL
(``jku``, ``x5u``) are never fetched: the keys are what the server was configured with.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, TypeAlias

import httpx
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from starlette.requests import HTTPConnection

from tether.auth._authenticate import bearer_token
from tether.auth._identity import ALL_SCOPES, Identity, Scope, check_scopes
from tether.errors import IdentityProviderUnavailable, Unauthenticated

__all__ = ("JwtBearer",)

logger = logging.getLogger("tether.auth")

PublicKey: TypeAlias = (
    rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey
)

_CURVES: Final = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}
_RSA: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_HMAC: Final = ("HS256", "HS384", "HS512")
ASYMMETRIC: Final[tuple[str, ...]] = (*_RSA, *_CURVES, "EdDSA")
"""The public-key algorithms a JWT may be signed with here."""
SYMMETRIC: Final[tuple[str, ...]] = _HMAC
"""The shared-secret algorithms."""
DEFAULT_PUBLIC_ALGORITHMS: Final = ("RS256", "ES256", "EdDSA", "PS256")
DEFAULT_SECRET_ALGORITHMS: Final = ("HS256",)
MIN_SECRET_BYTES: Final = 32
"""RFC 7518 §3.2: an HMAC key is at least as long as the hash (HS256: 256 bits)."""
MAX_JWKS_BYTES: Final = 1 << 20
DISPLAY_CLAIMS: Final = ("name", "email", "preferred_username")


@dataclass(frozen=True, slots=True)
class _Key:
    """A verification key, and the algorithm its JWK pins (``None``: any that fits it)."""

    key: PublicKey | bytes
    algorithm: str | None = None


class JwtBearer:
    """The ``Authenticate`` hook of bearer JWTs (``tether serve --auth jwt``): the token's
    verified claims become the request's :class:`~tether.auth.Identity`.

    Give exactly one key source: ``jwks_url``, the provider's key set (fetched when first
    needed, cached by ``kid``, fetched again after ``jwks_ttl`` seconds or for a ``kid`` it
    does not hold, never twice within ``jwks_refetch_floor`` seconds, one fetch at a time),
    or ``key``, a PEM public key (or certificate; a ``Path`` is read), a ``cryptography``
    public key, or an HMAC secret of at least 32 bytes. ``algorithms`` is the allow-list
    (default RS256, ES256, EdDSA and PS256 for public keys, HS256 for a secret).

    Set ``audience`` (what the provider puts in ``aud`` for this API) and ``issuer`` (its
    ``iss``, exactly, trailing slash included): without them any token the provider signed,
    for any application, is accepted.

    The claims: the subject is ``sub``; the tenant ``tenant_claim`` (absent: ``None``, every
    tenant's sessions, unless ``require_tenant``); the scopes ``scope_claim`` (default
    ``scope``, else ``scp``: a space-separated string or a list), keeping the Tether scopes
    and ignoring the others (scopes the provider grants for other APIs), and
    ``default_scopes`` when the token holds no Tether scope; the agents ``agents_claim``
    (absent or unset: every agent); the display name the first of ``display_claims``.

    A request without a bearer is ``None`` (no credential); a bad token raises
    :class:`~tether.errors.Unauthenticated` saying what is wrong; a key set that cannot be
    fetched :class:`~tether.errors.IdentityProviderUnavailable` (503). ``now`` is the clock
    (seconds since the epoch) for the token's times and the cache's. Close it
    (:meth:`aclose`, or ``async with``) to close its HTTP client.

    Example::

        authenticate = JwtBearer(
            jwks_url="https://issuer.example/.well-known/jwks.json",
            audience="my-api",
            issuer="https://issuer.example/",
        )
        app = create_app(runtime, authenticate=authenticate)
    """

    def __init__(
        self,
        *,
        jwks_url: str | None = None,
        key: str | bytes | Path | PublicKey | None = None,
        audience: str | Iterable[str] | None = None,
        issuer: str | None = None,
        algorithms: Iterable[str] | None = None,
        leeway: float = 30.0,
        tenant_claim: str = "tenant",
        require_tenant: bool = False,
        scope_claim: str | None = None,
        default_scopes: Iterable[Scope] = (),
        agents_claim: str | None = None,
        display_claims: Sequence[str] = DISPLAY_CLAIMS,
        jwks_ttl: float = 300.0,
        jwks_refetch_floor: float = 30.0,
        jwks_timeout: float = 5.0,
        http_client: httpx.AsyncClient | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        if (jwks_url is None) == (key is None):
            raise ValueError("give the keys: either jwks_url or key (a PEM public key or a secret)")
        if leeway < 0 or jwks_ttl < 0 or jwks_refetch_floor < 0 or jwks_timeout <= 0:
            raise ValueError("leeway, jwks_ttl and jwks_refetch_floor are >= 0, jwks_timeout > 0")
        self._static: _Key | None = None if key is None else _Key(_load_key(key))
        symmetric = self._static is not None and isinstance(self._static.key, bytes)
        self.algorithms = _allowed(algorithms, symmetric=symmetric)
        self.audience = _audience(audience)
        self.issuer = issuer
        self.leeway = leeway
        self.tenant_claim = tenant_claim
        self.require_tenant = require_tenant
        self.scope_claims = ("scope", "scp") if scope_claim is None else (scope_claim,)
        self.default_scopes = check_scopes(default_scopes)
        self.agents_claim = agents_claim
        self.display_claims = tuple(display_claims)
        self._now = now
        self.jwks_url: str | None = None
        self._shown_url = ""
        if jwks_url is not None:
            self.jwks_url, self._shown_url = _check_url(jwks_url)
        self._ttl = jwks_ttl
        self._floor = jwks_refetch_floor
        self._owns_client = http_client is None and jwks_url is not None
        self._client = (
            http_client
            if http_client is not None or jwks_url is None
            else httpx.AsyncClient(timeout=jwks_timeout, follow_redirects=False)
        )
        self._keys: dict[str | None, _Key] = {}
        self._fetched_at: float | None = None
        self._finished_at: float | None = None
        self._failure: IdentityProviderUnavailable | None = None
        self._generation = 0
        self._fetching = asyncio.Lock()

    async def __call__(self, request: HTTPConnection) -> Identity | None:
        token = bearer_token(request)
        return None if token is None else await self.verify(token)

    async def verify(self, token: str) -> Identity:
        """The identity of a bearer JWT, or :class:`~tether.errors.Unauthenticated` saying
        what is wrong with it.

        Example::

            identity = await authenticate.verify(token)
            assert identity.allows("sessions:read")
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated("the bearer token is not a well-formed JWT") from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in self.algorithms:
            raise Unauthenticated(
                f"the token's algorithm {str(algorithm)[:20]!r} is not allowed here "
                f"(allowed: {', '.join(self.algorithms)})"
            )
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise Unauthenticated("the token's key id (kid) is not a string")
        key = self._static if self._static is not None else await self._jwks_key(kid)
        if not _fits(algorithm, key):
            raise Unauthenticated(f"the token's algorithm {algorithm} does not fit its key")
        claims = _verified_claims(token, key.key, algorithm)
        self._check_times(claims)
        self._check_audience_and_issuer(claims)
        return self._identity(claims)

    # --- the claims ------------------------------------------------------------------

    def _check_times(self, claims: Mapping[str, Any]) -> None:
        now = self._now()
        if "exp" not in claims:
            raise Unauthenticated("the token has no expiry (exp): it is refused")
        expires = _timestamp(claims, "exp")
        if now - self.leeway >= expires:
            raise Unauthenticated(f"the token expired at {_when(expires)}")
        if "nbf" in claims and (not_before := _timestamp(claims, "nbf")) > now + self.leeway:
            raise Unauthenticated(f"the token is not valid yet: not before {_when(not_before)}")
        if "iat" in claims and (issued := _timestamp(claims, "iat")) > now + self.leeway:
            raise Unauthenticated(f"the token is not valid yet: issued at {_when(issued)}")

    def _check_audience_and_issuer(self, claims: Mapping[str, Any]) -> None:
        if self.audience:
            expected = " or ".join(repr(audience) for audience in sorted(self.audience))
            found = claims.get("aud")
            audiences = [found] if isinstance(found, str) else found
            if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
                raise Unauthenticated(f"the token names no audience (aud); expected {expected}")
            if self.audience.isdisjoint(audiences):
                shown = ", ".join(repr(audience[:80]) for audience in audiences[:5])
                raise Unauthenticated(f"the token is for audience {shown}, not {expected}")
        if self.issuer is not None:
            found = claims.get("iss")
            if found != self.issuer:
                shown = repr(found[:200]) if isinstance(found, str) else "no issuer (iss)"
                raise Unauthenticated(f"the token was issued by {shown}, not {self.issuer!r}")

    def _identity(self, claims: Mapping[str, Any]) -> Identity:
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise Unauthenticated("the token names no subject (sub)")
        tenant = claims.get(self.tenant_claim)
        if tenant is None and self.require_tenant:
            raise Unauthenticated(f"the token has no tenant (its {self.tenant_claim!r} claim)")
        if tenant is not None and (not isinstance(tenant, str) or not tenant):
            raise Unauthenticated(f"the token's tenant ({self.tenant_claim!r}) is not a string")
        scopes = self._scopes(claims)
        agents: frozenset[str] | None = None
        if self.agents_claim is not None and claims.get(self.agents_claim) is not None:
            agents = frozenset(_words(claims, self.agents_claim))
        display = next(
            (
                value
                for name in self.display_claims
                if isinstance(value := claims.get(name), str) and value
            ),
            None,
        )
        return Identity(subject, tenant=tenant, scopes=scopes, agents=agents, display=display)

    def _scopes(self, claims: Mapping[str, Any]) -> frozenset[Scope]:
        name = next((name for name in self.scope_claims if name in claims), None)
        granted = () if name is None else _words(claims, name)
        # A provider's token also carries the scopes of its other APIs (openid, profile, an
        # API of its own): those are not this server's to refuse.
        known = check_scopes(scope for scope in granted if scope in ALL_SCOPES)
        return known or self.default_scopes

    # --- the key set -----------------------------------------------------------------

    async def _jwks_key(self, kid: str | None) -> _Key:
        fresh = self._fetched_at is not None and self._now() - self._fetched_at < self._ttl
        key = self._cached(kid)
        # A key that is only old is used while another request fetches the new set: one
        # request waits for the provider, not all of them.
        if key is None or not (fresh or self._fetching.locked()):
            await self._refresh()
            key = self._cached(kid)
        if key is not None:  # a cached key is still used while a refetch fails
            return key
        if self._failure is not None:
            raise self._failure
        if kid is None:
            raise Unauthenticated(
                f"the token names no key id (kid), and the identity provider has {len(self._keys)}"
            )
        raise Unauthenticated(
            f"the token's key id {kid[:80]!r} is not one of the identity provider's keys "
            f"({self._shown_url})"
        )

    def _cached(self, kid: str | None) -> _Key | None:
        """The cached key of ``kid``; a token naming no key gets the only key there is."""
        if kid is None and None not in self._keys and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    async def _refresh(self) -> None:
        """Fetch the key set, unless a fetch ended less than the floor ago; a caller that
        waited for a fetch in flight takes its answer instead of fetching again."""
        generation = self._generation
        async with self._fetching:
            if self._generation != generation:
                return
            if self._finished_at is not None and self._now() - self._finished_at < self._floor:
                return
            try:
                keys = await self._fetch()
            except IdentityProviderUnavailable as exc:
                self._failure = exc
                logger.warning("%s", exc)
            else:
                self._keys, self._failure = keys, None
                self._fetched_at = self._now()
            self._finished_at = self._now()
            self._generation += 1

    async def _fetch(self) -> dict[str | None, _Key]:
        assert self._client is not None and self.jwks_url is not None
        unavailable = IdentityProviderUnavailable
        body = bytearray()
        try:
            async with self._client.stream(
                "GET", self.jwks_url, headers={"accept": "application/json"}
            ) as response:
                if response.status_code != 200:
                    redirect = " (redirects are not followed)" if response.is_redirect else ""
                    raise unavailable(
                        self._shown_url, f"it answered {response.status_code}{redirect}"
                    )
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_JWKS_BYTES:
                        raise unavailable(self._shown_url, "its answer is over 1 MiB")
        except httpx.TimeoutException:
            raise unavailable(self._shown_url, "it did not answer in time") from None
        except httpx.HTTPError as exc:
            raise unavailable(self._shown_url, f"{type(exc).__name__}: {exc}"[:300]) from None
        try:
            document = json.loads(body)
        except ValueError:
            raise unavailable(self._shown_url, "its answer is not JSON") from None
        found = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(found, list):
            raise unavailable(self._shown_url, 'its answer is not a key set (no "keys" list)')
        keys: dict[str | None, _Key] = {}
        for jwk in found:
            key = _jwk_key(jwk)
            if key is not None:
                keys[jwk.get("kid") if isinstance(jwk.get("kid"), str) else None] = key
        return keys

    async def aclose(self) -> None:
        """Close the HTTP client it made (not one it was given)."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


# --- keys and algorithms --------------------------------------------------------------


def _load_key(key: str | bytes | Path | PublicKey) -> PublicKey | bytes:
    """A public key (PEM, a certificate, or a key object), or the bytes of an HMAC secret."""
    if isinstance(key, Path):
        key = key.read_bytes()
    if isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
        return key
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return key
    if not isinstance(key, str | bytes):
        raise TypeError(f"a key is a PEM public key, a secret or a public key, not {key!r}")
    raw = key.encode() if isinstance(key, str) else key
    if raw.lstrip().startswith(b"-----BEGIN"):
        if b"PRIVATE KEY-----" in raw:
            raise ValueError("the key is a private key: give its public key (never share it)")
        try:
            if b"CERTIFICATE-----" in raw:
                loaded: Any = x509.load_pem_x509_certificate(raw).public_key()
            else:
                loaded = serialization.load_pem_public_key(raw)
        except ValueError:
            raise ValueError("the key looks like PEM but is not a public key") from None
        if not isinstance(loaded, PublicKey):
            raise ValueError(f"a {type(loaded).__name__} does not verify JWTs")
        return loaded
    if len(raw) < MIN_SECRET_BYTES:
        raise ValueError(f"an HMAC secret is at least {MIN_SECRET_BYTES} bytes (RFC 7518 §3.2)")
    return raw


def _allowed(algorithms: Iterable[str] | None, *, symmetric: bool) -> tuple[str, ...]:
    if algorithms is None:
        return DEFAULT_SECRET_ALGORITHMS if symmetric else DEFAULT_PUBLIC_ALGORITHMS
    allowed = tuple(dict.fromkeys(algorithms))
    if any(algorithm.lower() == "none" for algorithm in allowed):
        raise ValueError("the algorithm 'none' (an unsigned token) is never allowed")
    family, other = (SYMMETRIC, "a public key") if symmetric else (ASYMMETRIC, "a secret")
    for algorithm in allowed:
        if algorithm not in (*ASYMMETRIC, *SYMMETRIC):
            known = ", ".join((*ASYMMETRIC, *SYMMETRIC))
            raise ValueError(f"no JWT algorithm {algorithm!r}: the algorithms are {known}")
        if algorithm not in family:
            raise ValueError(f"{algorithm} is for {other}, not this key: allow {', '.join(family)}")
    if not allowed:
        raise ValueError("allow at least one algorithm")
    return allowed


def _fits(algorithm: str, key: _Key) -> bool:
    """Whether ``key`` verifies ``algorithm`` (the JWK's own ``alg``, if it pins one)."""
    if key.algorithm is not None and key.algorithm != algorithm:
        return False
    value = key.key
    if algorithm in _HMAC:
        return isinstance(value, bytes)
    if algorithm in _RSA:
        return isinstance(value, rsa.RSAPublicKey)
    if algorithm in _CURVES:
        return (
            isinstance(value, ec.EllipticCurvePublicKey) and value.curve.name == _CURVES[algorithm]
        )
    return isinstance(value, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey)


def _jwk_key(jwk: object) -> _Key | None:
    """The verification key of one JWK of a key set, or ``None`` to skip it: not for
    signatures, a symmetric key (a key set is public), or a kind this cannot read."""
    if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig" or jwk.get("kty") == "oct":
        return None
    pinned = jwk.get("alg")
    try:
        key = jwt.PyJWK(jwk).key
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError):
        logger.warning("a key of the identity provider's key set is skipped: unreadable")
        return None
    if not isinstance(key, PublicKey):
        return None
    return _Key(key, pinned if isinstance(pinned, str) else None)


def _verified_claims(token: str, key: PublicKey | bytes, algorithm: str) -> dict[str, Any]:
    """The token's claims, once its signature verifies with ``key``."""
    try:
        signed = jwt.PyJWS().decode_complete(token, key, algorithms=[algorithm])
    except jwt.InvalidSignatureError:
        raise Unauthenticated("the token's signature does not verify") from None
    except (jwt.InvalidAlgorithmError, jwt.InvalidKeyError):
        raise Unauthenticated(f"the token's algorithm {algorithm} does not fit its key") from None
    except jwt.PyJWTError:
        raise Unauthenticated("the bearer token is not a well-formed JWT") from None
    try:
        claims = json.loads(signed["payload"])
    except (ValueError, RecursionError):
        raise Unauthenticated("the token's claims are not JSON") from None
    if not isinstance(claims, dict):
        raise Unauthenticated("the token's claims are not a JSON object")
    return claims


# --- claim values ---------------------------------------------------------------------


def _timestamp(claims: Mapping[str, Any], name: str) -> float:
    value = claims[name]
    if not isinstance(value, bool) and isinstance(value, int | float):
        with contextlib.suppress(OverflowError):
            seconds = float(value)
            # Python's JSON reads NaN and Infinity: an expiry of NaN would never pass.
            if math.isfinite(seconds):
                return seconds
    raise Unauthenticated(f"the token's {name} is not a number of seconds")


def _when(seconds: float) -> str:
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
    except (OverflowError, ValueError, OSError):
        return f"{seconds:g} s after the epoch"


def _words(claims: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """A claim holding a space-separated string or a list of strings (``scope``, ``scp``)."""
    value = claims[name]
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(word, str) for word in value):
        return tuple(value)
    raise Unauthenticated(f"the token's {name!r} is neither a string nor a list of strings")


def _audience(audience: str | Iterable[str] | None) -> frozenset[str]:
    if audience is None:
        return frozenset()
    found = frozenset([audience] if isinstance(audience, str) else audience)
    if not found or not all(isinstance(a, str) and a for a in found):
        raise ValueError("an audience is a non-empty string (or several)")
    return found


def _check_url(url: str) -> tuple[str, str]:
    """The key set's URL, and how messages show it (no credentials, no query)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"the JWKS URL is not a URL: {exc}") from None
    if parsed.scheme not in ("https", "http") or not parsed.host:
        raise ValueError("the JWKS URL is an https:// URL")
    if parsed.scheme == "http" and parsed.host not in ("127.0.0.1", "::1", "localhost"):
        logger.warning("the JWKS is fetched over plain http: anyone on the way can swap its keys")
    port = f":{parsed.port}" if parsed.port is not None else ""
    return url, f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"
