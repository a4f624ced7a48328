"""JwtBearer: bearer JWTs verified against a key set served for real on 127.0.0.1 (an
asyncio server this test starts), a PEM public key or an HMAC secret, with keys made here;
time is the test's clock, so nothing expires by waiting."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from starlette.requests import HTTPConnection

from tether.auth import Identity, JwtBearer
from tether.demo import demo_agents
from tether.engine import Runtime
from tether.errors import IdentityProviderUnavailable, Unauthenticated
from tether.http import create_app
from tether.store import MemoryStore

NOW = 1_800_000_000.0
AUDIENCE = "my-api"
ISSUER = "https://issuer.test/"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ED_KEY = ed25519.Ed25519PrivateKey.generate()
SECRET = secrets.token_bytes(32)
SIGNERS: dict[str, Any] = {"RS256": RSA_KEY, "PS256": RSA_KEY, "ES256": EC_KEY, "EdDSA": ED_KEY}


class Clock:
    """The bearer's time, moved by the test."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def pem(private: Any) -> bytes:
    public: Any = private.public_key()
    return bytes(
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def jwk(private: Any, kid: str, **extra: str) -> dict[str, Any]:
    public = private.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        found = RSAAlgorithm.to_jwk(public, as_dict=True)
    elif isinstance(public, ec.EllipticCurvePublicKey):
        found = ECAlgorithm.to_jwk(public, as_dict=True)
    else:
        found = OKPAlgorithm.to_jwk(public, as_dict=True)
    return {**found, "kid": kid, "use": "sig", **extra}


def sign(key: Any, algorithm: str = "RS256", *, kid: str | None = "k1", **claims: Any) -> str:
    """A token of ``claims`` over the defaults (``None`` leaves a claim out)."""
    payload = {"sub": "alice", "iat": NOW, "exp": NOW + 600, "aud": AUDIENCE, "iss": ISSUER}
    payload = {name: value for name, value in {**payload, **claims}.items() if value is not None}
    return jwt.encode(payload, key, algorithm=algorithm, headers={"kid": kid} if kid else None)


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def forged(header: dict[str, Any], claims: dict[str, Any], secret: bytes | None) -> str:
    """A token PyJWT would refuse to make: ``alg: none``, or HMAC'd with a public key."""
    signing_input = f"{_b64(header)}.{_b64(claims)}"
    if secret is None:
        return signing_input + "."
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


@dataclass
class Jwks:
    """A key set served on 127.0.0.1: what it answers, how often it was asked, and a gate
    that holds its answers while it is closed."""

    keys: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    body: bytes | None = None
    url: str = ""
    fetches: int = 0
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    answering: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.gate.set()

    async def answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.answering.add(task)
        try:
            while (await reader.readline()).strip():
                pass  # the request line and headers: every path gets the key set
            self.fetches += 1
            self.asked.set()
            await self.gate.wait()
            body = self.body if self.body is not None else json.dumps({"keys": self.keys}).encode()
            writer.write(
                f"HTTP/1.1 {self.status} -\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except ConnectionError:
            pass  # the client gave up (a timeout): nothing to answer
        finally:
            writer.close()
            self.answering.discard(task)


@pytest.fixture
async def jwks() -> AsyncIterator[Jwks]:
    served = Jwks(keys=[jwk(RSA_KEY, "k1"), jwk(EC_KEY, "k2"), jwk(ED_KEY, "k3")])
    server = await asyncio.start_server(served.answer, "127.0.0.1", 0)
    served.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/jwks.json"
    async with server:
        yield served
        served.gate.set()
        await asyncio.gather(*served.answering)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def bearer(jwks: Jwks, clock: Clock) -> AsyncIterator[JwtBearer]:
    async with JwtBearer(
        jwks_url=jwks.url, audience=AUDIENCE, issuer=ISSUER, now=clock
    ) as authenticate:
        yield authenticate


def static(key: Any, clock: Clock, **options: Any) -> JwtBearer:
    return JwtBearer(key=key, audience=AUDIENCE, issuer=ISSUER, now=clock, **options)


async def refused(authenticate: JwtBearer, token: str) -> str:
    with pytest.raises(Unauthenticated) as caught:
        await authenticate.verify(token)
    return str(caught.value)


def request(authorization: str | None) -> HTTPConnection:
    headers = [] if authorization is None else [(b"authorization", authorization.encode())]
    return HTTPConnection({"type": "http", "headers": headers})


# --- the algorithms and the keys -------------------------------------------------------


@pytest.mark.parametrize(
    ("algorithm", "kid"), [("RS256", "k1"), ("PS256", "k1"), ("ES256", "k2"), ("EdDSA", "k3")]
)
async def test_each_public_key_algorithm_verifies_against_the_key_set(
    bearer: JwtBearer, algorithm: str, kid: str
) -> None:
    identity = await bearer(request(f"Bearer {sign(SIGNERS[algorithm], algorithm, kid=kid)}"))
    assert identity == Identity("alice", scopes=frozenset())


@pytest.mark.parametrize("algorithm", ["RS256", "PS256", "ES256", "EdDSA"])
async def test_each_public_key_algorithm_verifies_against_a_pem_key(
    clock: Clock, algorithm: str
) -> None:
    authenticate = static(pem(SIGNERS[algorithm]).decode(), clock)
    identity = await authenticate.verify(sign(SIGNERS[algorithm], algorithm))
    assert identity.subject == "alice"


async def test_a_shared_secret_verifies_hs256(clock: Clock) -> None:
    authenticate = static(SECRET, clock)
    assert (await authenticate.verify(sign(SECRET, "HS256"))).subject == "alice"
    assert "signature" in await refused(authenticate, sign(secrets.token_bytes(32), "HS256"))


async def test_no_bearer_is_no_identity_and_a_bad_one_is_refused(bearer: JwtBearer) -> None:
    assert await bearer(request(None)) is None
    assert await bearer(request("Basic YWxpY2U6cHc=")) is None
    with pytest.raises(Unauthenticated, match="not a well-formed JWT"):
        await bearer(request("Bearer not-a-jwt"))


async def test_an_unsigned_token_is_never_accepted(bearer: JwtBearer, clock: Clock) -> None:
    claims = {"sub": "mallory", "exp": NOW + 600, "aud": AUDIENCE, "iss": ISSUER}
    for header in ({"alg": "none"}, {"alg": "none", "kid": "k1"}, {"alg": "None"}):
        message = await refused(bearer, forged(header, claims, None))
        assert "is not allowed here" in message
    with pytest.raises(ValueError, match="'none'"):
        static(pem(RSA_KEY), clock, algorithms=["RS256", "none"])


async def test_an_hmac_token_keyed_with_the_public_key_is_refused(
    bearer: JwtBearer, clock: Clock
) -> None:
    """The algorithm confusion attack: the verifier's public key (public) as an HMAC secret."""
    claims = {"sub": "mallory", "exp": NOW + 600, "aud": AUDIENCE, "iss": ISSUER}
    token = forged({"alg": "HS256", "kid": "k1", "typ": "JWT"}, claims, pem(RSA_KEY))
    assert "'HS256' is not allowed here" in await refused(static(pem(RSA_KEY), clock), token)
    assert "'HS256' is not allowed here" in await refused(bearer, token)
    with pytest.raises(ValueError, match="HS256 is for a secret"):
        static(pem(RSA_KEY), clock, algorithms=["RS256", "HS256"])
    with pytest.raises(ValueError, match="RS256 is for a public key"):
        static(SECRET, clock, algorithms=["RS256"])


async def test_an_allowed_algorithm_that_does_not_fit_the_key_is_refused(
    jwks: Jwks, clock: Clock
) -> None:
    assert "does not fit its key" in await refused(
        static(pem(EC_KEY), clock), sign(RSA_KEY, "RS256")
    )
    jwks.keys = [jwk(RSA_KEY, "k1", alg="RS256")]  # a JWK that pins its algorithm
    async with JwtBearer(jwks_url=jwks.url, now=clock) as authenticate:
        assert "PS256 does not fit" in await refused(authenticate, sign(RSA_KEY, "PS256"))
        assert (await authenticate.verify(sign(RSA_KEY, "RS256"))).subject == "alice"


async def test_an_algorithm_left_out_of_the_allow_list_is_refused(clock: Clock) -> None:
    authenticate = static(pem(RSA_KEY), clock, algorithms=["RS256"])
    message = await refused(authenticate, sign(RSA_KEY, "PS256"))
    assert message == "the token's algorithm 'PS256' is not allowed here (allowed: RS256)"


def test_the_keys_are_checked_when_configured(clock: Clock) -> None:
    with pytest.raises(ValueError, match="either jwks_url or key"):
        JwtBearer()
    with pytest.raises(ValueError, match="either jwks_url or key"):
        JwtBearer(jwks_url="https://issuer.test/jwks", key=SECRET)
    with pytest.raises(ValueError, match="at least 32 bytes"):
        JwtBearer(key="short")
    private = RSA_KEY.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(ValueError, match="give its public key"):
        JwtBearer(key=private)
    with pytest.raises(ValueError, match="no JWT algorithm 'RS1'"):
        JwtBearer(key=pem(RSA_KEY), algorithms=["RS1"])
    with pytest.raises(ValueError, match="https"):
        JwtBearer(jwks_url="ftp://issuer.test/jwks")
    assert JwtBearer(key=RSA_KEY.public_key()).algorithms == ("RS256", "ES256", "EdDSA", "PS256")


async def test_a_pem_file_and_a_certificate_are_keys(clock: Clock, tmp_path: Path) -> None:
    (tmp_path / "key.pem").write_bytes(pem(EC_KEY))
    from_file = static(tmp_path / "key.pem", clock)
    assert (await from_file.verify(sign(EC_KEY, "ES256"))).subject == "alice"
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "issuer.test")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(RSA_KEY.public_key())
        .serial_number(1)
        .not_valid_before(datetime(2026, 1, 1, tzinfo=UTC))
        .not_valid_after(datetime(2036, 1, 1, tzinfo=UTC))
        .sign(RSA_KEY, hashes.SHA256())
    )
    from_certificate = static(certificate.public_bytes(serialization.Encoding.PEM), clock)
    assert (await from_certificate.verify(sign(RSA_KEY))).subject == "alice"


# --- the claims that are checked -------------------------------------------------------


async def test_an_expired_token_is_refused_after_the_leeway(
    bearer: JwtBearer, clock: Clock
) -> None:
    token = sign(RSA_KEY, exp=NOW - 29)
    assert (await bearer.verify(token)).subject == "alice"  # within the 30 s leeway
    clock.advance(2)
    assert await refused(bearer, token) == "the token expired at 2027-01-15T07:59:31+00:00"
    assert "no expiry" in await refused(bearer, sign(RSA_KEY, exp=None))
    assert "exp is not a number" in await refused(bearer, sign(RSA_KEY, exp="soon"))
    assert "exp is not a number" in await refused(bearer, sign(RSA_KEY, exp=float("nan")))


async def test_a_token_not_valid_yet_is_refused(bearer: JwtBearer) -> None:
    assert (await bearer.verify(sign(RSA_KEY, nbf=NOW + 29))).subject == "alice"
    assert "not valid yet: not before" in await refused(bearer, sign(RSA_KEY, nbf=NOW + 31))
    assert "not valid yet: issued at" in await refused(bearer, sign(RSA_KEY, iat=NOW + 31))


async def test_a_bad_signature_is_refused(bearer: JwtBearer) -> None:
    assert await refused(bearer, sign(OTHER_RSA_KEY)) == "the token's signature does not verify"
    header, _, signature = sign(RSA_KEY).split(".")
    tampered = _b64({"sub": "admin", "exp": NOW + 600, "aud": AUDIENCE, "iss": ISSUER})
    assert "does not verify" in await refused(bearer, f"{header}.{tampered}.{signature}")


async def test_the_audience_and_the_issuer_are_checked(bearer: JwtBearer, clock: Clock) -> None:
    message = await refused(bearer, sign(RSA_KEY, aud="billing"))
    assert message == "the token is for audience 'billing', not 'my-api'"
    assert (await bearer.verify(sign(RSA_KEY, aud=["billing", AUDIENCE]))).subject == "alice"
    assert "names no audience (aud); expected 'my-api'" in await refused(
        bearer, sign(RSA_KEY, aud=None)
    )
    message = await refused(bearer, sign(RSA_KEY, iss="https://evil.test/"))
    assert message == "the token was issued by 'https://evil.test/', not 'https://issuer.test/'"
    assert "no issuer (iss)" in await refused(bearer, sign(RSA_KEY, iss=None))
    unchecked = JwtBearer(key=pem(RSA_KEY), now=clock)  # neither configured: not checked
    assert (await unchecked.verify(sign(RSA_KEY, aud="billing", iss=None))).subject == "alice"


async def test_a_token_without_a_subject_is_refused(bearer: JwtBearer) -> None:
    assert await refused(bearer, sign(RSA_KEY, sub=None)) == "the token names no subject (sub)"
    assert "no subject" in await refused(bearer, sign(RSA_KEY, sub=""))


async def test_malformed_tokens_are_refused_without_echoing_them(bearer: JwtBearer) -> None:
    for token in ("abc", "a.b.c", "eyJhbGciOiJSUzI1NiJ9.!!.sig", sign(RSA_KEY) + "x"):
        message = await refused(bearer, token)
        assert token not in message
        assert "well-formed" in message or "does not verify" in message
    claims = {"sub": "alice", "exp": NOW + 600}
    token = forged({"alg": "RS256", "kid": 7}, claims, None)
    assert "well-formed" in await refused(bearer, token)  # a kid that is not a string


# --- the key set: cache, rotation, refetch floor, provider down ------------------------


async def test_concurrent_first_requests_share_one_fetch(bearer: JwtBearer, jwks: Jwks) -> None:
    jwks.gate.clear()
    async with asyncio.TaskGroup() as group:
        verifying = [group.create_task(bearer.verify(sign(RSA_KEY))) for _ in range(20)]
        await jwks.asked.wait()
        jwks.gate.set()
    assert {task.result().subject for task in verifying} == {"alice"}
    assert jwks.fetches == 1


async def test_a_new_key_id_fetches_the_rotated_key_set(
    bearer: JwtBearer, jwks: Jwks, clock: Clock
) -> None:
    assert (await bearer.verify(sign(RSA_KEY))).subject == "alice"
    jwks.keys = [jwk(RSA_KEY, "k1"), jwk(OTHER_RSA_KEY, "k4")]
    clock.advance(31)
    assert (await bearer.verify(sign(OTHER_RSA_KEY, kid="k4", exp=NOW + 900))).subject == "alice"
    assert jwks.fetches == 2
    assert (await bearer.verify(sign(RSA_KEY, exp=NOW + 900))).subject == "alice"  # cached
    assert jwks.fetches == 2


async def test_the_key_set_is_fetched_again_after_its_ttl(
    bearer: JwtBearer, jwks: Jwks, clock: Clock
) -> None:
    await bearer.verify(sign(RSA_KEY))
    jwks.keys = [jwk(OTHER_RSA_KEY, "k4")]  # k1 retired
    clock.advance(299)
    assert (await bearer.verify(sign(RSA_KEY, exp=NOW + 900))).subject == "alice"
    assert jwks.fetches == 1
    clock.advance(2)
    message = await refused(bearer, sign(RSA_KEY, exp=NOW + 900))
    assert (
        message
        == f"the token's key id 'k1' is not one of the identity provider's keys ({jwks.url})"
    )
    assert jwks.fetches == 2


async def test_while_the_old_key_set_is_fetched_again_its_keys_serve_the_others(
    bearer: JwtBearer, jwks: Jwks, clock: Clock
) -> None:
    await bearer.verify(sign(RSA_KEY))
    clock.advance(301)
    jwks.asked.clear()
    jwks.gate.clear()
    async with asyncio.TaskGroup() as group:
        refreshing = group.create_task(bearer.verify(sign(RSA_KEY, exp=NOW + 900)))
        await jwks.asked.wait()
        for _ in range(5):  # answered from the cache while the fetch is held
            assert (await bearer.verify(sign(EC_KEY, "ES256", kid="k2", exp=NOW + 900))).subject
        assert not refreshing.done()
        jwks.gate.set()
    assert refreshing.result().subject == "alice"
    assert jwks.fetches == 2


async def test_a_flood_of_unknown_key_ids_fetches_at_most_once_per_floor(
    bearer: JwtBearer, jwks: Jwks, clock: Clock
) -> None:
    await bearer.verify(sign(RSA_KEY))
    for _ in range(50):
        assert "is not one of" in await refused(bearer, sign(RSA_KEY, kid=secrets.token_hex(8)))
    assert jwks.fetches == 1  # the key set was fetched less than 30 s ago
    clock.advance(30)
    async with asyncio.TaskGroup() as group:
        for _ in range(50):
            group.create_task(refused(bearer, sign(RSA_KEY, kid=secrets.token_hex(8))))
    for _ in range(50):
        await refused(bearer, sign(RSA_KEY, kid=secrets.token_hex(8)))
    assert jwks.fetches == 2


async def test_a_token_without_a_key_id_takes_the_only_key(jwks: Jwks, clock: Clock) -> None:
    jwks.keys = [jwk(EC_KEY, "only")]
    async with JwtBearer(jwks_url=jwks.url, now=clock) as authenticate:
        assert (await authenticate.verify(sign(EC_KEY, "ES256", kid=None))).subject == "alice"
        jwks.keys.append(jwk(ED_KEY, "second"))
        clock.advance(301)
        message = await refused(authenticate, sign(EC_KEY, "ES256", kid=None))
        assert message == "the token names no key id (kid), and the identity provider has 2"


async def test_keys_a_key_set_cannot_offer_are_skipped(jwks: Jwks, clock: Clock) -> None:
    jwks.keys = [
        {"kty": "oct", "k": base64.urlsafe_b64encode(SECRET).decode(), "kid": "k1"},
        {**jwk(RSA_KEY, "k2"), "use": "enc"},
        {"kty": "XYZ", "kid": "k3"},
        "not a key",  # type: ignore[list-item]
        jwk(EC_KEY, "k4"),
    ]
    async with JwtBearer(jwks_url=jwks.url, now=clock) as authenticate:
        assert "HS256' is not allowed" in await refused(authenticate, sign(SECRET, "HS256"))
        assert "'k2' is not one of" in await refused(authenticate, sign(RSA_KEY, kid="k2"))
        assert "'k3' is not one of" in await refused(authenticate, sign(RSA_KEY, kid="k3"))
        assert (await authenticate.verify(sign(EC_KEY, "ES256", kid="k4"))).subject == "alice"


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections (bound, never listening)."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (500, b"oops", "it answered 500"),
        (302, b"", "it answered 302 (redirects are not followed)"),
        (200, b"<html>sign in</html>", "its answer is not JSON"),
        (200, b'{"issuer": "x"}', 'its answer is not a key set (no "keys" list)'),
    ],
)
async def test_a_key_set_that_cannot_be_read_is_the_typed_503_error(
    bearer: JwtBearer, jwks: Jwks, status: int, body: bytes, reason: str
) -> None:
    jwks.status, jwks.body = status, body
    with pytest.raises(IdentityProviderUnavailable) as caught:
        await bearer.verify(sign(RSA_KEY))
    assert caught.value.url == jwks.url
    assert (
        str(caught.value)
        == f"the identity provider's keys at {jwks.url} could not be fetched: {reason}"
    )


async def test_a_refused_connection_is_the_typed_error_naming_the_url(
    refusing_port: int, clock: Clock
) -> None:
    url = f"http://user:pw@127.0.0.1:{refusing_port}/jwks.json?token=s3cret"
    async with JwtBearer(jwks_url=url, now=clock) as authenticate:
        with pytest.raises(IdentityProviderUnavailable) as caught:
            await authenticate.verify(sign(RSA_KEY))
    assert caught.value.url == f"http://127.0.0.1:{refusing_port}/jwks.json"
    assert "ConnectError" in caught.value.reason
    assert "s3cret" not in str(caught.value) and "pw" not in str(caught.value)


async def test_a_key_set_that_does_not_answer_in_time_is_the_typed_error(
    jwks: Jwks, clock: Clock
) -> None:
    jwks.gate.clear()
    async with JwtBearer(jwks_url=jwks.url, jwks_timeout=0.1, now=clock) as authenticate:
        with pytest.raises(IdentityProviderUnavailable, match="did not answer in time"):
            await authenticate.verify(sign(RSA_KEY))


async def test_while_the_provider_is_down_it_is_asked_once_per_floor(
    bearer: JwtBearer, jwks: Jwks, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    jwks.status = 503
    for _ in range(5):
        with pytest.raises(IdentityProviderUnavailable):
            await bearer.verify(sign(RSA_KEY))
    assert jwks.fetches == 1
    jwks.status = 200
    clock.advance(30)
    assert (await bearer.verify(sign(RSA_KEY))).subject == "alice"
    assert jwks.fetches == 2
    jwks.status = 503  # down again when the cache is stale: its keys still serve
    clock.advance(600)
    with caplog.at_level(logging.WARNING, logger="tether.auth"):
        assert (await bearer.verify(sign(RSA_KEY, exp=NOW + 1200))).subject == "alice"
    assert jwks.fetches == 3
    assert "could not be fetched: it answered 503" in caplog.text


async def test_the_provider_down_answers_503_over_http(jwks: Jwks, clock: Clock) -> None:
    jwks.status = 500
    async with JwtBearer(jwks_url=jwks.url, now=clock) as authenticate:
        app = create_app(Runtime(demo_agents(), MemoryStore()), authenticate=authenticate)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tether.test") as client:
            answer = await client.get(
                "/v1/sessions", headers={"authorization": f"Bearer {sign(RSA_KEY)}"}
            )
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["type"] == "identity_provider_unavailable"
    assert jwks.url in error["message"]


async def test_a_given_http_client_is_used_and_left_open(jwks: Jwks, clock: Clock) -> None:
    async with httpx.AsyncClient() as client:
        async with JwtBearer(jwks_url=jwks.url, http_client=client, now=clock) as authenticate:
            assert (await authenticate.verify(sign(RSA_KEY))).subject == "alice"
        assert not client.is_closed


# --- the claims that make the identity -------------------------------------------------


async def test_the_scopes_come_from_scope_or_scp_and_others_are_ignored(
    bearer: JwtBearer,
) -> None:
    identity = await bearer.verify(sign(RSA_KEY, scope="openid sessions:read approvals:decide"))
    assert identity.scopes == {"sessions:read", "approvals:decide"}
    identity = await bearer.verify(sign(RSA_KEY, scp=["sessions:write", "billing:read"]))
    assert identity.scopes == {"sessions:write"}
    assert (await bearer.verify(sign(RSA_KEY, scp="admin"))).allows("sessions:erase")
    assert "'scope' is neither a string nor a list" in await refused(bearer, sign(RSA_KEY, scope=7))


async def test_a_configured_scope_claim_and_default_scopes(clock: Clock) -> None:
    authenticate = static(
        pem(RSA_KEY), clock, scope_claim="permissions", default_scopes=["sessions:read"]
    )
    identity = await authenticate.verify(sign(RSA_KEY, permissions=["sessions:abort"]))
    assert identity.scopes == {"sessions:abort"}
    identity = await authenticate.verify(sign(RSA_KEY, scope="sessions:erase"))
    assert identity.scopes == {"sessions:read"}  # scope is not the claim read here
    identity = await authenticate.verify(sign(RSA_KEY, permissions="openid profile"))
    assert identity.scopes == {"sessions:read"}  # no Tether scope: the defaults
    with pytest.raises(ValueError, match="no scope 'sessions:everything'"):
        static(pem(RSA_KEY), clock, default_scopes=["sessions:everything"])


async def test_the_tenant_comes_from_its_claim(bearer: JwtBearer, clock: Clock) -> None:
    assert (await bearer.verify(sign(RSA_KEY, tenant="acme"))).tenant == "acme"
    assert (await bearer.verify(sign(RSA_KEY))).tenant is None
    assert "tenant ('tenant') is not a string" in await refused(bearer, sign(RSA_KEY, tenant=3))
    strict = static(pem(RSA_KEY), clock, tenant_claim="org_id", require_tenant=True)
    assert (await strict.verify(sign(RSA_KEY, org_id="globex"))).tenant == "globex"
    message = await refused(strict, sign(RSA_KEY, tenant="acme"))
    assert message == "the token has no tenant (its 'org_id' claim)"


async def test_the_display_name_and_the_agents(bearer: JwtBearer, clock: Clock) -> None:
    claims = {"name": "Alice A.", "email": "alice@acme.test", "preferred_username": "alice1"}
    assert (await bearer.verify(sign(RSA_KEY, **claims))).display == "Alice A."
    del claims["name"]
    assert (await bearer.verify(sign(RSA_KEY, **claims))).display == "alice@acme.test"
    del claims["email"]
    assert (await bearer.verify(sign(RSA_KEY, **claims))).display == "alice1"
    nameless = await bearer.verify(sign(RSA_KEY))
    assert nameless.display is None and nameless.name == "alice"
    assert nameless.agents is None
    scoped = static(pem(RSA_KEY), clock, agents_claim="agents")
    listed = await scoped.verify(sign(RSA_KEY, agents=["support"]))
    assert listed.agents == frozenset({"support"})
    spaced = await scoped.verify(sign(RSA_KEY, agents="support triage"))
    assert spaced.agents == frozenset({"support", "triage"})
    assert (await scoped.verify(sign(RSA_KEY))).agents is None
