"""Who may do what: verified identities, their scopes and tenants, and the authenticators
that turn a request's credential into one (docs/auth.md).

Example::

    from tether.auth import StaticToken

    app = create_app(runtime, authenticate=StaticToken("s3cret"))

or the bearer JWTs of an OIDC provider::

    from tether.auth import JwtBearer

    app = create_app(
        runtime,
        authenticate=JwtBearer(
            jwks_url="https://issuer.example/.well-known/jwks.json",
            audience="my-api",
            issuer="https://issuer.example/",
        ),
    )
"""

from typing import TYPE_CHECKING, Any

from tether.auth._authenticate import (
    Authenticate,
    StaticToken,
    authenticate_credential,
    authenticate_with,
    bearer_token,
)
from tether.auth._authorize import Authorize, Resource, ResourceKind, authorize_with
from tether.auth._identity import ALL_SCOPES, Identity, Scope, check_scopes
from tether.auth._tokens import IssuedToken, StoredTokens, issue_token

if TYPE_CHECKING:
    from tether.auth._jwt import JwtBearer


def __getattr__(name: str) -> Any:
    # JwtBearer is imported on first use: PyJWT, cryptography and httpx cost a quarter of a
    # second of every server's start, and only ``--auth jwt`` needs them.
    if name != "JwtBearer":
        raise AttributeError(f"module 'tether.auth' has no attribute {name!r}")
    from tether.auth._jwt import JwtBearer

    globals()[name] = JwtBearer
    return JwtBearer


__all__ = (
    "ALL_SCOPES",
    "Authenticate",
    "Authorize",
    "Identity",
    "IssuedToken",
    "JwtBearer",
    "Resource",
    "ResourceKind",
    "Scope",
    "StaticToken",
    "StoredTokens",
    "authenticate_credential",
    "authenticate_with",
    "authorize_with",
    "bearer_token",
    "check_scopes",
    "issue_token",
)
