"""A writer's fence: one it minted, or ``NOT_MINTED``, which supersedes no one and which the
store takes (as its fence 0) only while no writer has minted one."""

import pytest

from tether.errors import Fenced
from tether.journal import NOT_MINTED, Journal
from tether.records import Signal
from tether.store import SessionKey, Store

from .harnesses import new_conversation


async def test_a_writer_that_minted_none_supersedes_no_one_and_writes_until_one_does(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    unminted = await Journal.open(store, cid, fence=NOT_MINTED)
    assert unminted.log.fence is NOT_MINTED and unminted.log.store_fence == 0
    await unminted.log.append([unminted.log.draft(Signal(type="first", body=""), None)])
    minted = await Journal.open(store, cid)  # mints: supersedes every earlier writer
    assert isinstance(minted.log.fence, int) and minted.log.fence >= 1
    await minted.refresh()
    await minted.log.append([minted.log.draft(Signal(type="second", body=""), None)])
    await unminted.refresh()
    with pytest.raises(Fenced):
        await unminted.log.append([unminted.log.draft(Signal(type="third", body=""), None)])
    # Opening without minting left the minted writer as it was.
    await Journal.open(store, cid, fence=NOT_MINTED)
    await minted.log.append([minted.log.draft(Signal(type="fourth", body=""), None)])


async def test_the_writer_that_creates_a_conversation_has_minted_none(store: Store) -> None:
    created = await Journal.open_session(store, SessionKey("agent", "inst", "new"))
    assert created.log.fence is NOT_MINTED
