"""How ``tether serve``'s auth options become the server's authentication (docs/auth.md):
``--auth token`` (the shared ``--auth-token``, every scope), ``--auth tokens`` (the tokens
``tether tokens create`` issued, in the store), ``--auth jwt`` (bearer JWTs checked against
``--jwks`` or ``--jwt-key``), or ``--auth module:function`` (an application's own hook);
and ``--authorize module:function``, the application's rules beyond scopes (with any of them).

Everything is checked before the server opens anything; the hook itself is made once the
store is open (stored tokens read it).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from tether.cli._exit import ExitCode, fail
from tether.cli._imports import import_attribute

if TYPE_CHECKING:
    from tether.engine import Runtime

__all__ = (
    "AUTH",
    "AUTHORIZE",
    "JWKS",
    "JWT_AUDIENCE",
    "JWT_ISSUER",
    "JWT_KEY",
    "JWT_SCOPE_CLAIM",
    "JWT_TENANT_CLAIM",
    "AuthChoice",
    "choose_auth",
)

AUTH = typer.Option(
    None,
    "--auth",
    help="How requests authenticate: token (the --auth-token), tokens (those `tether tokens "
    "create` issued), jwt (bearer JWTs: --jwks or --jwt-key), or module:function (your own "
    "hook returning a tether.auth.Identity). Default: token if --auth-token is given.",
)
AUTHORIZE = typer.Option(
    None,
    "--authorize",
    help="module:function: your rules beyond scopes, asked (identity, action, resource) on "
    "every route naming a resource, True or False (needs --auth or --auth-token).",
)
JWKS = typer.Option(None, "--jwks", help="With --auth jwt: the JWKS URL of the issuer.")
JWT_KEY = typer.Option(
    None,
    "--jwt-key",
    help="With --auth jwt, instead of --jwks: a shared HMAC secret, or @FILE for a PEM public key.",
)
JWT_AUDIENCE = typer.Option(None, "--jwt-audience", help="The audience a JWT must name.")
JWT_ISSUER = typer.Option(None, "--jwt-issuer", help="The issuer a JWT must name.")
JWT_TENANT_CLAIM = typer.Option(
    "tenant", "--jwt-tenant-claim", help="The claim naming the caller's tenant."
)
JWT_SCOPE_CLAIM = typer.Option(
    "scope", "--jwt-scope-claim", help="The claim listing the caller's scopes."
)

_JWT_OPTIONS = ("--jwks", "--jwt-key", "--jwt-audience", "--jwt-issuer")


@dataclass(frozen=True)
class AuthChoice:
    """What ``serve`` was told about auth, checked: ``kind`` is ``none``, ``token``,
    ``tokens``, ``jwt`` or ``hook``."""

    kind: str
    token: str | None = None
    hook: Callable[..., Any] | None = None
    jwt: dict[str, Any] = field(default_factory=dict)
    authorize: Callable[..., Any] | None = None
    """The ``--authorize`` hook, if given."""

    @property
    def secured(self) -> bool:
        """Whether requests must authenticate."""
        return self.kind != "none"

    @contextlib.asynccontextmanager
    async def app_options(self, runtime: Runtime) -> AsyncIterator[dict[str, Any]]:
        """``create_app``'s auth options, for the runtime the server runs on (its store
        keeps the issued tokens), while the server runs (a JWKS client is closed after)."""
        async with self._authentication(runtime) as options:
            if self.authorize is not None:
                options["authorize"] = self.authorize
            yield options

    @contextlib.asynccontextmanager
    async def _authentication(self, runtime: Runtime) -> AsyncIterator[dict[str, Any]]:
        if self.kind == "token":
            yield {"auth_token": self.token}
        elif self.kind == "tokens":
            from tether.auth import StoredTokens
            from tether.store import TokenStore

            store = runtime.store
            if not isinstance(store, TokenStore):
                fail(f"--auth tokens: the store {type(store).__name__} keeps no tokens")
            yield {"authenticate": StoredTokens(store)}
        elif self.kind == "jwt":
            from tether.auth import JwtBearer

            async with JwtBearer(**self.jwt) as bearer:
                yield {"authenticate": bearer}
        else:
            yield {"authenticate": self.hook}


def choose_auth(
    auth: str | None,
    token: str | None,
    *,
    jwks: str | None = None,
    jwt_key: str | None = None,
    audience: str | None = None,
    issuer: str | None = None,
    tenant_claim: str = "tenant",
    scope_claim: str = "scope",
    authorize: str | None = None,
    app_authenticate: Callable[..., Any] | None = None,
    app_authorize: Callable[..., Any] | None = None,
) -> AuthChoice:
    """The auth ``serve``'s options describe, or ``typer.BadParameter`` saying what is
    missing or contradictory (a hook that cannot be imported exits with
    :attr:`ExitCode.BAD_APP`). The App's ``authenticate`` and ``authorize`` hooks serve
    where the options name none."""
    choice = _authentication(
        auth, token, jwks, jwt_key, audience, issuer, tenant_claim, scope_claim
    )
    if not choice.secured and app_authenticate is not None:
        choice = AuthChoice("hook", hook=app_authenticate)
    if authorize is None and app_authorize is None:
        return choice
    if not choice.secured:
        asked = "--authorize" if authorize is not None else "the App's authorize"
        raise typer.BadParameter(
            f"{asked} needs --auth (or --auth-token, or the App's authenticate): "
            "without auth, no one is known",
            param_hint="--authorize",
        )
    hook = (
        _hook(authorize, "--authorize", "myapp.auth:authorize")
        if authorize is not None
        else app_authorize
    )
    return dataclasses.replace(choice, authorize=hook)


def _hook(spec: str, option: str, example: str) -> Callable[..., Any]:
    hook = import_attribute(spec, option, example)
    if not callable(hook):
        fail(f"{option} {spec}: {type(hook).__name__} is not a function", ExitCode.BAD_APP)
    return hook  # type: ignore[no-any-return]


def _authentication(
    auth: str | None,
    token: str | None,
    jwks: str | None,
    jwt_key: str | None,
    audience: str | None,
    issuer: str | None,
    tenant_claim: str,
    scope_claim: str,
) -> AuthChoice:
    if token is not None and not token.strip():
        # An empty token (e.g. TETHER_AUTH_TOKEN="") would let in "Bearer " with no secret.
        raise typer.BadParameter(
            "the token is empty: give one, or unset TETHER_AUTH_TOKEN to serve without",
            param_hint="--auth-token",
        )
    jwt_given = [
        name
        for name, value in zip(_JWT_OPTIONS, (jwks, jwt_key, audience, issuer), strict=True)
        if value is not None
    ]
    kind = auth or ("token" if token is not None else "none")
    if kind != "jwt" and jwt_given:
        raise typer.BadParameter(f"{jwt_given[0]} is for --auth jwt", param_hint="--auth")
    if kind != "token" and token is not None:
        raise typer.BadParameter(
            f"--auth-token is the shared token of --auth token, not of --auth {kind}",
            param_hint="--auth",
        )
    if kind == "token":
        if token is None:
            raise typer.BadParameter("--auth token needs --auth-token", param_hint="--auth")
        return AuthChoice("token", token=token)
    if kind in ("none", "tokens"):
        return AuthChoice(kind)
    if kind == "jwt":
        return AuthChoice(
            "jwt", jwt=_jwt_options(jwks, jwt_key, audience, issuer, tenant_claim, scope_claim)
        )
    if ":" not in kind:
        raise typer.BadParameter(
            f"{kind!r} is none of token, tokens, jwt, or a module:function", param_hint="--auth"
        )
    return AuthChoice("hook", hook=_hook(kind, "--auth", "myapp.auth:authenticate"))


def _jwt_options(
    jwks: str | None,
    key: str | None,
    audience: str | None,
    issuer: str | None,
    tenant_claim: str,
    scope_claim: str,
) -> dict[str, Any]:
    if (jwks is None) == (key is None):
        raise typer.BadParameter(
            "--auth jwt checks tokens against --jwks URL or --jwt-key (one of them)",
            param_hint="--auth",
        )
    if key is not None and key.startswith("@"):
        try:
            key = Path(key[1:]).read_text()
        except OSError as exc:
            raise typer.BadParameter(
                f"cannot read the key {key[1:]}: {exc.strerror}", param_hint="--jwt-key"
            ) from None
    options: dict[str, Any] = {"tenant_claim": tenant_claim, "scope_claim": scope_claim}
    if jwks is not None:
        options["jwks_url"] = jwks
    if key is not None:
        options["key"] = key
    if audience is not None:
        options["audience"] = audience
    if issuer is not None:
        options["issuer"] = issuer
    return options
