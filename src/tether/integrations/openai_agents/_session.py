"""The Agents SDK's ``Session`` (its conversation memory) kept in a Tether session's log.

The log is append-only and hash-chained, so every change to the SDK's history is a record,
never an edit: each ``add_items``, ``pop_item`` and ``clear_session`` is one execution of
the ``openai_agents.session`` harness, written in one commit, whose inputs are signals:

- ``openai_agents.item``: one SDK input item, its JSON as the signal's body;
- ``openai_agents.withdrawn``: ``pop_item`` took back the item of the record at ``{"seq": n}``;
- ``openai_agents.cleared``: ``clear_session`` set aside every item before it.

The history the SDK reads is the items folded in log order. What was popped or cleared is
withdrawn from that history, not erased from the log (retention erases it, with the session
or the head of its log).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Final, cast

from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import resolve_session_limit
from pydantic import JsonValue

from tether.errors import Conflict, ConversationNotFound, Fenced
from tether.integrations.openai_agents._convert import jsonable
from tether.journal import Journal, Turn
from tether.records import Record, Signal
from tether.store import SessionKey, Store, open_store

__all__ = ("CLEARED", "ITEM", "WITHDRAWN", "TetherSession", "fold")

ITEM: Final = "openai_agents.item"
"""A signal holding one SDK input item (its JSON as the body)."""
WITHDRAWN: Final = "openai_agents.withdrawn"
"""A signal taking back one item: ``{"seq": <the item's record>}`` (``pop_item``)."""
CLEARED: Final = "openai_agents.cleared"
"""A signal setting aside every item before it (``clear_session``)."""

_WRITES = 8
"""How many times a change is tried when another writer of the session went first."""


class _SessionWrite:
    """The harness of one change to an SDK session: its signals are the change, so it calls
    nothing and returns how many it wrote (a replay of it is trivially the same)."""

    name = "openai_agents.session"
    version = "1"

    async def run(self, turn: Turn) -> JsonValue:
        return {"signals": len(turn.inputs)}


def _body(value: object) -> str:
    return json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":"))


def fold(records: Iterable[Record]) -> list[tuple[int, TResponseInputItem]]:
    """The items a session's records leave in its history, with their records' seqs."""
    items: dict[int, TResponseInputItem] = {}
    for record in records:
        payload = record.payload
        if not isinstance(payload, Signal):
            continue
        if payload.type == ITEM:
            items[record.seq] = cast(TResponseInputItem, json.loads(payload.body))
        elif payload.type == WITHDRAWN:
            items.pop(int(json.loads(payload.body)["seq"]), None)
        elif payload.type == CLEARED:
            items.clear()
    return list(items.items())  # a dict keeps insertion order: the log's


class TetherSession:
    """An Agents SDK ``Session`` whose items live in a Tether session's log.

    ``Runner.run(agent, input, session=TetherSession(...))`` then keeps the conversation in
    Tether: durable in the store (``memory://``, ``sqlite:///…``, ``postgresql://…``, or an
    open ``Store``), hash-chained, visible in the console and over HTTP as the session
    ``agent/instance/session_id``. ``pop_item`` and ``clear_session`` append records that
    withdraw items; nothing is ever rewritten. A store opened from a URL is closed by
    :meth:`close` (or ``async with``); a ``Store`` passed in is the caller's to close.

    The session's conversation belongs to the SDK session: do not also dispatch a Tether
    agent to it (a durable agent's memory is its own Tether session, and ``durable(...,
    session=...)`` refuses any SDK session).

    Example::

        async with TetherSession("ticket-42", "sqlite:///./tether-data") as session:
            result = await Runner.run(agent, "where is my order?", session=session)
            print(await session.get_items())
    """

    def __init__(
        self,
        session_id: str,
        store: Store | str,
        *,
        agent: str = "openai-agents",
        instance: str = "default",
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.key = SessionKey(agent, instance, session_id)
        self._store: Store | None = None if isinstance(store, str) else store
        self._url = store if isinstance(store, str) else None
        self._owned = isinstance(store, str)

    async def store(self) -> Store:
        """The store the session is kept in (opened from its URL on first use)."""
        if self._store is None:
            assert self._url is not None
            self._store = await open_store(self._url)
        return self._store

    async def close(self) -> None:
        """Close the store if this session opened it from a URL."""
        if self._owned and self._store is not None:
            store, self._store = self._store, None
            await store.close()

    async def __aenter__(self) -> TetherSession:
        await self.store()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def conversation_id(self) -> str | None:
        """The id of the session's conversation (``None`` until something was added)."""
        try:
            return (await (await self.store()).find_conversation(self.key)).id
        except ConversationNotFound:
            return None

    async def _records(self) -> list[Record]:
        """The records of the session's log (none before anything was added)."""
        store = await self.store()
        conversation_id = await self.conversation_id()
        records: list[Record] = []
        while conversation_id is not None and (
            page := await store.read(conversation_id, after_seq=records[-1].seq if records else 0)
        ):
            records.extend(page)
        return records

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's history, oldest first; the latest ``limit`` items when given (or
        when ``session_settings.limit`` is)."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
        records = await self._records()
        items = [item for _, item in fold(records)]
        return items if limit is None else items[-limit:]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` to the history (one commit for them all)."""
        if not items:
            return
        signals = [Signal(type=ITEM, body=_body(item)) for item in items]
        await self._write(lambda records: signals)

    async def pop_item(self) -> TResponseInputItem | None:
        """Withdraw the latest item from the history and return it (``None`` when empty)."""
        popped: list[TResponseInputItem] = []

        def withdraw(records: list[Record]) -> list[Signal]:
            popped.clear()
            items = fold(records)
            if not items:
                return []
            seq, item = items[-1]
            popped.append(item)
            return [Signal(type=WITHDRAWN, body=_body({"seq": seq}))]

        await self._write(withdraw)
        return popped[0] if popped else None

    async def clear_session(self) -> None:
        """Withdraw every item (the records stay in the log, set aside)."""
        clear = [Signal(type=CLEARED, body="{}")]
        await self._write(lambda records: clear if fold(records) else [])

    async def _write(self, change: Callable[[list[Record]], list[Signal]]) -> None:
        """Append the signals ``change(records)`` makes of the log as it stands, as one
        execution in one commit, at the head it was read at; again from a fresh read if
        another writer went first (``change`` may decide differently then: a pop takes the
        new last item)."""
        store = await self.store()
        for attempt in range(_WRITES):
            records = await self._records()
            signals = change(records)
            if not signals:
                return  # nothing to change: not even the conversation is made
            journal = await Journal.open_session(store, self.key)
            head = records[-1].seq if records else 1  # a new log holds conversation_created
            try:
                await journal.exec(_SessionWrite(), signals, expected_seq=head, defer_start=True)
                return
            except (Conflict, Fenced):
                if attempt == _WRITES - 1:
                    raise
