"""Reading commands (records, spans, verify, replay, fork) never create a store: on a path with
none they fail, naming it, and leave nothing behind."""

from pathlib import Path

import pytest

from ..postgres import fresh_schema, postgres_reachable, store_url
from .command import tether

pytestmark = pytest.mark.process

READERS = [
    ["records", "c-1"],
    ["spans", "c-1"],
    ["verify", "c-1"],
    ["replay", "c-1", "--demo"],
    ["fork", "c-1", "--at", "1"],
]


@pytest.mark.parametrize("command", READERS, ids=lambda command: command[0])
def test_no_store_at_the_default_path(tmp_path: Path, command: list[str]) -> None:
    failed = tether(*command, cwd=tmp_path, code=6)
    assert "no store at ./tether-data: it does not exist" in failed.error
    assert list(tmp_path.iterdir()) == []  # ./tether-data was not created


@pytest.mark.parametrize("command", READERS, ids=lambda command: command[0])
def test_no_store_in_a_given_directory(tmp_path: Path, command: list[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    failed = tether(*command, "--store", f"sqlite:///{empty}", code=6)
    assert f"no store at {empty}: no tether.db in it" in failed.error
    assert list(empty.iterdir()) == []


@pytest.mark.postgres
def test_no_store_in_a_postgresql_schema() -> None:
    schema = fresh_schema()
    failed = tether("records", "c-1", "--store", store_url(schema), code=6)
    assert f"(no schema {schema!r} in that database)" in failed.error
    assert postgres_reachable()
    # ...and it was not created: a second look finds none either.
    assert tether("verify", "c-1", "--store", store_url(schema), code=6).error
