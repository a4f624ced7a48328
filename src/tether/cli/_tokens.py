"""``tether tokens``: the API tokens of a store, for ``tether serve --auth tokens``.
``create`` issues one and shows it once, ``list`` shows what was issued (never a token nor
its digest), ``revoke`` ends one (docs/auth.md)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console

from tether.cli._exit import ExitCode, fail
from tether.cli._help import WholeSummaries
from tether.cli._serve import DEFAULT_STORE_URL
from tether.cli._sessions import aligned
from tether.cli._stores import open_store_or_fail

if TYPE_CHECKING:
    from tether.store import TokenRow, TokenStore

__all__ = ("parse_duration", "tokens_app")

console = Console(soft_wrap=True, highlight=False, emoji=False)
T = TypeVar("T")

STORE = typer.Option(
    DEFAULT_STORE_URL,
    "--store",
    help="The store whose tokens these are (sqlite:///dir, postgresql://...): the one "
    "`tether serve --auth tokens` serves.",
)
JSON = typer.Option(False, "--json", help="Print JSON, for programs.")
SCOPES = typer.Option(
    ...,
    "--scope",
    metavar="SCOPE",
    help="A scope it holds (sessions:read, approvals:decide, admin...). Repeatable.",
)
AGENTS = typer.Option(
    None,
    "--agent",
    metavar="AGENT",
    help="An agent it may use (default: every agent). Repeatable.",
)

tokens_app = typer.Typer(
    cls=WholeSummaries,
    help="Create, list and revoke the API tokens of a store (`tether serve --auth tokens`).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+)\s*([smhdw])")


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s`` or ``2w`` as a positive duration (``ValueError``
    otherwise)."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None or int(found[1]) == 0:
        raise ValueError(
            f"--expires-in {text!r}: give a positive whole number and a unit, s, m, h, d or w "
            "(e.g. 30d)"
        )
    return timedelta(seconds=int(found[1]) * _UNITS[found[2]])


def _with_tokens(store_url: str, create: bool, use: Callable[[TokenStore], Awaitable[T]]) -> T:
    """``use`` on the store's tokens; a store error is one line and exit 1."""
    from tether.errors import TetherError
    from tether.store import StoreCapabilities, require_capability

    async def run() -> T:
        async with await open_store_or_fail(store_url, create=create) as store:
            tokens = require_capability(StoreCapabilities.of(store).tokens, "tokens")
            return await use(tokens)

    try:
        return asyncio.run(run())
    except TetherError as exc:
        fail(f"{exc.code}: {exc}")


def _time(moment: datetime | None, absent: str = "-") -> str:
    return absent if moment is None else moment.strftime("%Y-%m-%d %H:%M:%SZ")


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def _json(row: TokenRow) -> dict[str, Any]:
    """A token as JSON, camelCase as on the wire; never its digest."""
    return {
        "id": row.id,
        "subject": row.subject,
        "tenant": row.tenant,
        "scopes": list(row.scopes),
        "agents": None if row.agents is None else list(row.agents),
        "display": row.display,
        "createdAt": _iso(row.created_at),
        "expiresAt": _iso(row.expires_at),
        "revokedAt": _iso(row.revoked_at),
    }


@tokens_app.command()
def create(
    subject: str = typer.Option(
        ..., "--subject", help="Who the token is for: a person's or a program's id."
    ),
    tenant: str | None = typer.Option(
        None, "--tenant", help="The tenant whose sessions it sees (default: every tenant's)."
    ),
    scopes: list[str] = SCOPES,
    agents: list[str] | None = AGENTS,
    display: str | None = typer.Option(
        None, "--display", help="The name people are shown (default: the subject)."
    ),
    expires_in: str | None = typer.Option(
        None, "--expires-in", help="Expire after this long: 30d, 12h, 90m, 2w (default: never)."
    ),
    store: str = STORE,
    as_json: bool = JSON,
) -> None:
    """Issue a token and print it once: the store keeps only its digest. A store that
    does not exist yet is created, as `tether serve` would."""
    from tether.auth import Identity, check_scopes, issue_token

    try:
        lasts = None if expires_in is None else parse_duration(expires_in)
        # Everything checked before the store is opened (or created): a refused token
        # writes nothing.
        Identity(
            subject,
            tenant=tenant,
            scopes=check_scopes(scopes),
            agents=None if agents is None else frozenset(agents),
            display=display,
        )
        if agents is not None and not all(agents):
            raise ValueError("--agent: an agent name is a non-empty string")
    except ValueError as exc:
        fail(str(exc), ExitCode.USAGE)
    now = datetime.now(UTC)
    issued = _with_tokens(
        store,
        True,
        lambda tokens: issue_token(
            tokens,
            subject=subject,
            tenant=tenant,
            scopes=scopes,
            agents=agents,
            display=display,
            expires_at=None if lasts is None else now + lasts,
            now=now,
        ),
    )
    if as_json:
        console.print_json(data={"token": issued.token, **_json(issued.row)})
        return
    console.print(f"token: {issued.token}", markup=False)
    console.print(f"id:    {issued.row.id}", markup=False)
    console.print(
        "This token will not be shown again: the store keeps only its digest. "
        f"Revoke it with `tether tokens revoke {issued.row.id}`.",
        markup=False,
    )


@tokens_app.command(name="list")
def list_(
    subject: str | None = typer.Option(None, "--subject", help="Only this subject's."),
    tenant: str | None = typer.Option(None, "--tenant", help="Only this tenant's."),
    include_revoked: bool = typer.Option(False, "--all", help="The revoked ones too."),
    store: str = STORE,
    as_json: bool = JSON,
) -> None:
    """List the tokens issued, by id (the order they were issued in): who each is for, its
    scopes and agents, when it expires. Never a token nor its digest."""
    rows = _with_tokens(
        store,
        False,
        lambda tokens: tokens.list_tokens(
            subject=subject, tenant=tenant, include_revoked=include_revoked
        ),
    )
    if as_json:
        console.print_json(data={"tokens": [_json(row) for row in rows]})
        return
    if not rows:
        console.print("no tokens")
        return
    table = [["id", "subject", "tenant", "scopes", "agents", "created", "expires", "revoked"]]
    for row in rows:
        table.append(
            [
                row.id,
                row.subject,
                row.tenant or "(every)",
                ",".join(row.scopes) or "-",
                "(every)" if row.agents is None else ",".join(row.agents) or "-",
                _time(row.created_at),
                _time(row.expires_at, "never"),
                _time(row.revoked_at),
            ]
        )
    for line in aligned(table):
        console.print(line, markup=False)


@tokens_app.command()
def revoke(
    token_id: str = typer.Argument(help="The token's id (tok_..., as `tether tokens list` shows)."),
    store: str = STORE,
) -> None:
    """Revoke a token: from now on a request that presents it is refused (401). Revoking
    it again changes nothing."""
    now = datetime.now(UTC)
    row = _with_tokens(store, False, lambda tokens: tokens.revoke_token(token_id, now=now))
    assert row.revoked_at is not None
    when = _time(row.revoked_at)
    if row.revoked_at == now:
        console.print(f"revoked {row.id} ({row.subject}) at {when}", markup=False)
    else:
        console.print(f"{row.id} ({row.subject}) was already revoked at {when}", markup=False)
