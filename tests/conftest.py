"""Fixtures shared across the test tree."""

import compileall
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tether.engine import ManualClock
from tether.store import MemoryStore, Store

from .postgres import drop_schemas, open_pooled, postgres_reachable
from .processes import reap_started
from .schedule import slowest_first
from .sqlite import open_sqlite

ROOT = Path(__file__).resolve().parents[1]
SOAK_TIMEOUT = 3600  # seconds a test may take under TETHER_SOAK=1 (ten times the work)
PROCESS_FIXTURES = frozenset({"serve", "server", "make_console", "browser"})
"""A test that asks for one of these talks to a real uvicorn, a ``tether serve`` child or a
browser: it is a ``process`` test (a module that starts processes itself says so)."""

# Hypothesis's property tests run a bounded tier by default: fewer examples than Hypothesis's
# 100, the same ones every run (a failure in CI fails again where it is rerun). A soak
# (TETHER_SOAK=1) draws ten times Hypothesis's default, new ones each run. A test's own
# @settings still decide what they name.
settings.register_profile("bounded", max_examples=50, derandomize=True)
settings.register_profile("soak", max_examples=1000, derandomize=False)
settings.load_profile("soak" if os.environ.get("TETHER_SOAK") else "bounded")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the source tree once, before any worker starts, where Python would not
    keep what it compiles (``PYTHONDONTWRITEBYTECODE``, as CI machines set it). Hundreds of
    processes the tests start (``tether serve``, the CLI, crash workers) import Tether from
    ``src``: without its bytecode on disk each would compile it again, a third of a second
    of CPU apiece."""
    if sys.dont_write_bytecode and not hasattr(config, "workerinput"):  # xdist's controller
        for tree in ("src", "tests", "examples", "benchmarks"):
            compileall.compile_dir(ROOT / tree, quiet=2, workers=1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``slow`` tests run only under ``TETHER_SOAK=1``, which also lifts the state machines'
    timeout along with their budget. Tests of real processes are marked ``process`` (run
    everything, as CI does, or leave them out of a quick loop with ``-m 'not process'``).

    PostgreSQL tests need the server. CI always has one (``.ci/run`` starts it), so there a
    missing server fails them; elsewhere they are skipped with the reason.

    The slowest tests go first, one to each xdist worker (``tests/schedule.py``)."""
    slowest_first(config, items)
    soak = bool(os.environ.get("TETHER_SOAK"))
    for item in items:
        if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.process)
        if "slow" in item.keywords and not soak:
            item.add_marker(pytest.mark.skip(reason="a soak setting: set TETHER_SOAK=1"))
        if soak and ("slow" in item.keywords or item.name.startswith("test_state_machine")):
            item.add_marker(pytest.mark.timeout(SOAK_TIMEOUT))
    if os.environ.get("CI") or postgres_reachable():
        return
    skip = pytest.mark.skip(reason="no PostgreSQL server at TETHER_TEST_POSTGRES_URL")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _reap_child_processes() -> Iterator[None]:
    """A test that failed half-way leaves no child running, nor a ``Popen`` whose collection
    would warn (and so fail) in some later test."""
    yield
    reap_started()


@pytest.fixture(scope="module", autouse=True)
def _environment_restored(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test module leaves ``os.environ`` as it found it: a setting left behind would change
    what every later module runs with (use ``monkeypatch``, or ``MonkeyPatch.context()`` in a
    module-scoped fixture). A leak is undone, then reported as an error of the module."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = sorted(
        name
        for name in before.keys() | after.keys()
        if before.get(name) != after.get(name) and name != "PYTEST_CURRENT_TEST"  # pytest's own
    )
    if not changed:
        return
    for name in changed:
        if name in before:
            os.environ[name] = before[name]
        else:
            del os.environ[name]
    pytest.fail(f"{request.node.nodeid} left environment variables changed: {changed}")


@pytest.fixture(scope="session", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    yield
    drop_schemas()


@pytest.fixture
def clock() -> ManualClock:
    """The test's time: the runtimes of ``make_runtime`` (and the servers of ``serve``) run
    on it unless given another clock, so a lease, a deadline or a backoff passes when the
    test advances it."""
    return ManualClock()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each test runs on the reference in-memory store, on SQLite (a copy of a freshly
    migrated file: ``tests/sqlite.py``) and on PostgreSQL (a schema of its own, migrated
    and empty: ``tests/postgres.py``)."""
    opened: Store
    if request.param == "memory":
        opened = MemoryStore()
    elif request.param == "sqlite":
        opened = await open_sqlite(tmp_path)
    else:
        opened = await open_pooled()
    yield opened
    await opened.close()
