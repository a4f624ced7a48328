"""What a PostgreSQL store's waiters hear: NOTIFY from any process, turned into the wake-ups
of this one (tailers on append, workers on work, waiters on settlement, runs on steer).

One :class:`~tether.store.postgres._listen.Listener` feeds two notifiers: ``appends`` by
conversation id, ``signals`` by topic (``work``, ``settled:<id>``, ``steer:<id>``). A store's
own writes wake its local waiters directly (its own NOTIFY's echo is skipped).
"""

from __future__ import annotations

import asyncio
import contextlib

from tether.store._notify import AppendNotifier
from tether.store.postgres._listen import Listener
from tether.store.postgres._log import LAST_IN_SESSION, Channels

__all__ = ("Wakeups",)


class Wakeups:
    def __init__(self, conninfo: str, channels: Channels) -> None:
        self.channels = channels
        self.appends = AppendNotifier()
        self.signals = AppendNotifier()  # "work", settled submission ids, steers
        self.work_heard = 0
        """How many work notices this process has heard: one heard during a write shows here."""
        self.listener = Listener(
            conninfo,
            {
                channels.append: self._on_append,
                channels.work: lambda _: self.work(),
                channels.settled: self._on_settled,
                channels.steer: self._on_steer,
            },
        )

    def work(self) -> None:
        """Something may be runnable."""
        self.work_heard += 1
        self.signals.notify(["work"])

    def settled(self, submission_id: str, *, more_work: bool = True) -> None:
        """A submission settled; ``more_work``: its session may have a next head to claim."""
        # A settlement frees its session's next head, if one is queued.
        self.signals.notify([f"settled:{submission_id}", *(("work",) if more_work else ())])

    def _on_settled(self, payload: str) -> None:
        if not payload:  # the listener reconnected: anything may have settled
            self.signals.notify_all()
            return
        submission_id = payload.removesuffix(LAST_IN_SESSION)
        self.settled(submission_id, more_work=submission_id == payload)

    def _on_append(self, payload: str) -> None:
        if not payload:
            self.appends.notify_all()
            return
        self.appends.notify([payload.rpartition(":")[0]])

    def _on_steer(self, payload: str) -> None:
        if not payload:  # the listener reconnected: anything may have been missed
            self.signals.notify_all()
            return
        self.signals.notify([f"steer:{payload}"])

    def listen(
        self, topic: str, event: asyncio.Event | None = None
    ) -> contextlib.AbstractContextManager[asyncio.Event]:
        """See ``PostgresStore.listen``."""
        # A settlement frees a session's next head, so it wakes the claim loop too. A worker
        # (it listens for work) hears of steers from the start, so that none is announced
        # before a run of its has subscribed.
        channels = self.channels
        self.listener.want(channels.settled)
        if topic == "work":
            self.listener.want(channels.work)
        if topic == "work" or topic.startswith("steer:"):
            self.listener.want(channels.steer)
        return self.signals.listen(topic, event)

    def tail(self) -> AppendNotifier:
        """The append notifier, listening on the append channel from now on."""
        self.listener.want(self.channels.append)
        return self.appends
