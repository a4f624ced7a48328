"""Tether's pytest plugin: the ``tether_failpoints`` fixture (docs/testing.md).

pytest loads it by itself where Tether is installed (its ``pytest11`` entry point); a project
that disables plugin autoloading names it in its ``conftest.py``::

    pytest_plugins = ["tether.testing.pytest_plugin"]

It imports nothing of Tether until a test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tether.testing import Failpoints

__all__ = ("tether_failpoints",)


@pytest.fixture
def tether_failpoints() -> Iterator[Failpoints]:
    """Failpoints for one test, all disarmed when it ends: ``arm`` a spec, then read
    ``hits`` and ``fired``.

    Example::

        async def test_retries_a_failed_search(tether_failpoints, runtime):
            tether_failpoints.arm("tool.call=error(once)")
            outcome = await runtime.dispatch_and_wait("researcher", "find the paper")
            assert tether_failpoints.fired("tool.call") == 1
    """
    from tether.testing import failpoints

    with failpoints() as armed:
        yield armed
