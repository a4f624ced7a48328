"""``Runtime.created_by``: who created a session, as its ``conversation_created`` says (what
an ``authorize`` hook is shown as a resource's owner): the verified sender of the message
that created it, who forked it for a fork (its own record, after the copied ones), still
after retention cut the log's head, and no one for a session no authenticated request made."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tether.engine import Retention, Runtime
from tether.records import Actor
from tether.store import Store

from .agents import echo_agent

WAIT = 30
ANN = Actor(subject="ann", tenant="acme", display="Ann")
BOB = Actor(subject="bob", tenant="acme")


async def _say(runtime: Runtime, body: str, by: Actor | None = None) -> str:
    message = {"kind": "user", "body": body, **({"by": by} if by else {})}
    receipt = await runtime.dispatch("echo", "acme", message, session="s", tenant="acme")
    async with asyncio.timeout(WAIT):
        await runtime.wait(receipt.submission_id)
    return receipt.conversation_id


async def test_the_owner_is_who_created_the_session_or_its_fork(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start()
    cid = await _say(runtime, "hi", ANN)
    await _say(runtime, "again", BOB)  # a later sender owns nothing
    conversation = await runtime.conversation_by_id(cid)
    assert await runtime.created_by(conversation) == ANN
    fork = await runtime.fork(cid, at_seq=await store.head(cid), session="bobs", by=BOB)
    assert await runtime.created_by(await runtime.conversation_by_id(fork.id)) == BOB
    nobodys = await runtime.dispatch("echo", "other", "hi")
    assert (
        await runtime.created_by(await runtime.conversation_by_id(nobodys.conversation_id)) is None
    )


async def test_the_owner_outlives_a_cut_of_the_logs_head(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start()
    cid = await _say(runtime, "message 0", ANN)
    for n in range(1, 12):
        await _say(runtime, f"message {n}", BOB)
    report = await runtime.prune(Retention(keep_records=10))
    assert [outcome.conversation_id for outcome in report.outcomes] == [cid]
    [anchor] = await store.read(cid, limit=1)
    assert anchor.kind == "log_truncated"
    assert await runtime.created_by(await runtime.conversation_by_id(cid)) == ANN
