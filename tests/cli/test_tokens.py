"""``tether tokens`` (issue 39): ``create`` shows a token once and keeps its digest,
``list`` never shows a token nor its digest, ``revoke`` ends one; bad input writes nothing."""

import asyncio
import hashlib
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.requests import HTTPConnection
from typer.testing import CliRunner, Result

from tether.auth import Identity, StoredTokens
from tether.cli import app
from tether.cli._tokens import parse_duration
from tether.errors import Unauthenticated
from tether.store import SqliteStore, TokenRow

runner = CliRunner()


def cli(*args: str, code: int = 0) -> Result:
    result = runner.invoke(app, ["tokens", *args])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def error(result: Result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def kept(directory: Path) -> list[TokenRow]:
    async def run() -> list[TokenRow]:
        async with await SqliteStore.open(directory) as store:
            return await store.list_tokens(include_revoked=True)

    return asyncio.run(run())


def identity_of(directory: Path, token: str) -> Identity | None:
    async def run() -> Identity | None:
        request = HTTPConnection(
            {"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())]}
        )
        async with await SqliteStore.open(directory) as store:
            return await StoredTokens(store)(request)

    return asyncio.run(run())


CREATE = (
    "create",
    "--subject",
    "support-1",
    "--tenant",
    "acme",
    "--scope",
    "sessions:read",
    "--scope",
    "approvals:decide",
    "--agent",
    "assistant",
)


def test_create_prints_the_token_once_and_the_store_keeps_its_digest(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shown = cli(*CREATE, "--display", "Support One", "--store", f"sqlite:///{data}").stdout
    token = re.search(r"^token: (tether_\S{43})$", shown, re.MULTILINE)
    token_id = re.search(r"^id:    (tok_\S+)$", shown, re.MULTILINE)
    assert token is not None and token_id is not None, shown
    assert "will not be shown again" in shown
    [row] = kept(data)
    assert row.id == token_id[1]
    assert row.digest == hashlib.sha256(token[1].encode()).hexdigest()
    assert (row.subject, row.tenant, row.scopes, row.agents, row.display, row.expires_at) == (
        "support-1",
        "acme",
        ("sessions:read", "approvals:decide"),
        ("assistant",),
        "Support One",
        None,
    )
    assert identity_of(data, token[1]) == Identity(
        "support-1",
        tenant="acme",
        scopes=frozenset({"sessions:read", "approvals:decide"}),
        agents=frozenset({"assistant"}),
        display="Support One",
    )


def test_create_json_is_for_programs_and_expires_in_sets_the_expiry(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'data'}"
    made = json.loads(cli(*CREATE, "--expires-in", "30d", "--json", "--store", url).stdout)
    assert set(made) == {
        "token",
        "id",
        "subject",
        "tenant",
        "scopes",
        "agents",
        "display",
        "createdAt",
        "expiresAt",
        "revokedAt",
    }
    assert made["token"].startswith("tether_") and made["id"].startswith("tok_")
    assert made["scopes"] == ["sessions:read", "approvals:decide"]
    assert (made["tenant"], made["agents"], made["revokedAt"]) == ("acme", ["assistant"], None)
    [row] = kept(tmp_path / "data")
    assert row.expires_at == row.created_at + timedelta(days=30)
    assert made["expiresAt"] == row.expires_at.isoformat().replace("+00:00", "Z")


def test_list_shows_the_tokens_but_never_a_secret_nor_its_digest(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'data'}"
    first = json.loads(cli(*CREATE, "--json", "--store", url).stdout)
    second = json.loads(
        cli("create", "--subject", "bot", "--scope", "admin", "--json", "--store", url).stdout
    )
    listed = cli("list", "--store", url).stdout
    lines = listed.splitlines()
    assert lines[0].split() == [
        "id",
        "subject",
        "tenant",
        "scopes",
        "agents",
        "created",
        "expires",
        "revoked",
    ]
    assert [line.split()[0] for line in lines[1:]] == [first["id"], second["id"]]
    assert "sessions:read,approvals:decide" in lines[1] and "never" in lines[1]
    assert lines[2].split()[1:5] == ["bot", "(every)", "admin", "(every)"]
    for row in kept(tmp_path / "data"):
        assert row.digest not in listed
    for made in (first, second):
        assert made["token"] not in listed and made["token"][7:] not in listed
    as_json = cli("list", "--json", "--store", url).stdout
    assert [t["id"] for t in json.loads(as_json)["tokens"]] == [first["id"], second["id"]]
    assert "digest" not in as_json and first["token"] not in as_json
    assert cli("list", "--subject", "bot", "--store", url).stdout.count("tok_") == 1
    assert cli("list", "--tenant", "acme", "--store", url).stdout.count("tok_") == 1
    assert cli("list", "--tenant", "globex", "--store", url).stdout == "no tokens\n"


def test_revoke_ends_a_token_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = f"sqlite:///{data}"
    made = json.loads(cli(*CREATE, "--json", "--store", url).stdout)
    done = cli("revoke", made["id"], "--store", url).stdout
    assert done.startswith(f"revoked {made['id']} (support-1) at ")
    [row] = kept(data)
    assert row.revoked_at is not None
    again = cli("revoke", made["id"], "--store", url).stdout
    assert again.startswith(f"{made['id']} (support-1) was already revoked at ")
    assert kept(data) == [row]
    with pytest.raises(Unauthenticated, match="token revoked"):
        identity_of(data, made["token"])
    assert cli("list", "--store", url).stdout == "no tokens\n"
    assert made["id"] in cli("list", "--all", "--store", url).stdout
    unknown = error(cli("revoke", "tok_absent", "--store", url, code=1))
    assert unknown == "error: token_not_found: token tok_absent not found"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--scope", "sessions:delete"), "no scope 'sessions:delete'"),
        (("--scope", "admin", "--expires-in", "3y"), "--expires-in '3y'"),
        (("--scope", "admin", "--expires-in", "0d"), "--expires-in '0d'"),
        (("--scope", "admin", "--tenant", ""), "tenant"),
        (("--scope", "admin", "--agent", ""), "agent"),
    ],
)
def test_bad_input_is_exit_2_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    data = tmp_path / "data"
    refused = cli("create", "--subject", "s", *args, "--store", f"sqlite:///{data}", code=2)
    assert message in error(refused)
    assert not data.exists()  # not even a store was created


def test_subject_and_scope_are_required(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'data'}"
    assert "--subject" in cli("create", "--scope", "admin", "--store", url, code=2).stderr
    assert "--scope" in cli("create", "--subject", "s", "--store", url, code=2).stderr
    assert not (tmp_path / "data").exists()


def test_list_and_revoke_never_create_a_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none'}"
    assert "no store at" in error(cli("list", "--store", url, code=6))
    assert "no store at" in error(cli("revoke", "tok_x", "--store", url, code=6))
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("90m", 5400), ("12h", 43200), ("30d", 2592000), ("2w", 1209600), ("1D", 86400)],
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)
