"""The PostgreSQL store's connection pool under cancellation: a connection is handed back
whole however its user is cancelled, as an SSE stream's request is when its client leaves
(anyio cancels such a task again at every await until it is done, its cleanup included)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tether.errors import SubmissionNotFound
from tether.store.postgres import PostgresStore

from ..postgres import fresh_schema, store_url

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store() -> AsyncIterator[PostgresStore]:
    """A store of one connection: a lost one is felt at the next request."""
    store = await PostgresStore.open(store_url(fresh_schema(), pool_max="1"))
    try:
        yield store
    finally:
        await store.close()


async def _cancelled_until_done(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` at every turn of the loop until it has ended, as an anyio cancel
    scope does."""
    while not task.done():
        task.cancel()
        await asyncio.sleep(0)


async def test_a_request_queued_while_the_holder_is_cancelled_gets_the_connection(
    store: PostgresStore,
) -> None:
    """The holder's cancellation reaches it as it hands the connection to the request just
    queued for it (which holds its own handover lock for one turn of the loop): the handover
    must finish, or the request waits out the pool's timeout with no connection coming."""
    holding = asyncio.Event()

    async def hold() -> None:
        async with store._connection(atomic=False):
            holding.set()
            await asyncio.Event().wait()

    holder = asyncio.create_task(hold())
    await holding.wait()
    queued = asyncio.create_task(store.get_submission("nobody"))
    await _cancelled_until_done(holder)
    async with asyncio.timeout(10):  # the pool's own timeout is 30 s
        with pytest.raises(SubmissionNotFound):
            await queued
    with pytest.raises(SubmissionNotFound):  # and the pool still has its connection
        await asyncio.wait_for(store.get_submission("nobody"), 10)
