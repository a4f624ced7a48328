"""Revoked credentials (issue 36, item 10: the console's sign-out): a revocation is kept in
the store, so every runtime on it sees it, a later one too, and erasing sessions leaves it."""

import asyncio
from collections.abc import Callable

import pytest

from tether.engine import Runtime
from tether.store import Store

from .agents import echo_agent


async def test_a_revocation_is_seen_by_every_runtime_on_the_store(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    first = make_runtime({"echo": echo_agent()})
    await first.start()
    assert not await first.is_revoked("console:a")
    await first.revoke("console:a")
    await first.revoke("console:a")  # again: nothing changes
    assert await first.is_revoked("console:a")
    assert not await first.is_revoked("console:b")
    await first.close()
    later = make_runtime({"echo": echo_agent()})  # a restart, or another process
    await later.start()
    assert await later.is_revoked("console:a")
    with pytest.raises(ValueError, match="not empty"):
        await later.revoke("")


async def test_erasing_a_session_leaves_the_revocations(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start()
    await runtime.revoke("console:kept")
    receipt = await runtime.dispatch("echo", "acme", "hello", session="gone")
    async with asyncio.timeout(60):
        await runtime.wait(receipt.submission_id)
    await runtime.erase_session("echo", "acme", session="gone")
    assert await runtime.is_revoked("console:kept")
