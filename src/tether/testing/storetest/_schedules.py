"""Conformance cases for the ``schedules`` capability (``ScheduleStore``): durable schedule
definitions kept, listed and forgotten."""

from __future__ import annotations

from typing import Any

import pytest

from tether.errors import DispatchConflict
from tether.store import ScheduleRow
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("ScheduleCases",)


@needs("schedules")
class ScheduleCases(BaseConformance):
    """Keeping schedules."""

    @case
    async def test_put_schedule_is_idempotent(self, store: CompleteStore, fx: Fixtures) -> None:
        definition: dict[str, Any] = {"cron": "0 9 * * *", "agent": "support", "n": [1, 2.5]}
        kept = await store.put_schedule(ScheduleRow("sched-1", definition, fx.at(1)))
        assert kept == ScheduleRow("sched-1", definition, fx.at(1))
        again = await store.put_schedule(ScheduleRow("sched-1", dict(definition), fx.at(9)))
        assert again == kept  # the one kept, with its own time
        with pytest.raises(DispatchConflict):
            await store.put_schedule(ScheduleRow("sched-1", {**definition, "n": []}, fx.at(1)))
        assert await store.list_schedules() == [kept]
        listed = await store.list_schedules()
        listed[0].definition["cron"] = "changed"  # type: ignore[index]
        assert await store.list_schedules() == [kept]

    @case
    async def test_schedules_are_listed_oldest_first(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        assert await store.list_schedules() == []
        for sid, at in (("sched-b", 2), ("sched-c", 1), ("sched-a", 2), ("sched-d", 3)):
            await store.put_schedule(ScheduleRow(sid, {"id": sid}, fx.at(at)))
        listed = await store.list_schedules()
        assert [row.id for row in listed] == ["sched-c", "sched-a", "sched-b", "sched-d"]
        assert [row.created_at for row in listed] == [fx.at(1), fx.at(2), fx.at(2), fx.at(3)]
        assert listed[0].definition == {"id": "sched-c"}

    @case
    async def test_delete_schedule(self, store: CompleteStore, fx: Fixtures) -> None:
        await store.put_schedule(ScheduleRow("sched-1", {"every": 60}, fx.at(1)))
        await store.put_schedule(ScheduleRow("sched-2", {"every": 5}, fx.at(2)))
        assert await store.delete_schedule("sched-1") is True
        assert await store.delete_schedule("sched-1") is False
        assert await store.delete_schedule("sched-absent") is False
        assert [row.id for row in await store.list_schedules()] == ["sched-2"]
        # Deleted, the id takes another definition.
        await store.delete_schedule("sched-2")
        assert await store.put_schedule(ScheduleRow("sched-2", {"every": 1}, fx.at(3))) == (
            ScheduleRow("sched-2", {"every": 1}, fx.at(3))
        )
