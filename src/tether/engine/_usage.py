"""Token usage and cost, totalled from the journaled completions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from tether.messages import Usage
from tether.models import cost_of
from tether.records import (
    AssistantMessageCompleted,
    LogTruncated,
    ModelCalled,
    Record,
    TaskFinished,
)

__all__ = ("ChildUsage", "UsageTotals", "total_usage")


@dataclass(frozen=True, slots=True)
class ChildUsage:
    """What one child submission's model calls used (its own children's included), as its
    parent recorded it when the child's answer came back."""

    submission_id: str
    conversation_id: str
    agent: str | None
    usage: Usage
    calls: int
    cost: float | None


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Sums over model calls, a submission's children's included (each also listed in
    ``children``). A field is ``None`` if no call reported it; ``cost`` is ``None`` if any
    call's model has no known price (an unknown cost is never shown as zero)."""

    calls: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost: float | None = None
    children: tuple[ChildUsage, ...] = ()


def _add(total: int | None, value: int | None) -> int | None:
    if value is None:
        return total
    return (total or 0) + value


def total_usage(records: Iterable[Record], *, submission_id: str | None = None) -> UsageTotals:
    models: dict[str, str] = {}
    totals = UsageTotals()
    cost: float | None = 0.0
    children: list[ChildUsage] = []
    for record in records:
        if submission_id is not None and record.submission_id != submission_id:
            continue
        if record.kind == TaskFinished.KIND:
            finished = record.payload
            assert isinstance(finished, TaskFinished)
            child = ChildUsage(
                submission_id=finished.child_submission_id,
                conversation_id=finished.child_conversation_id,
                agent=finished.agent,
                usage=finished.usage or Usage(),
                calls=finished.model_calls or 0,
                cost=finished.cost if finished.model_calls else 0.0,
            )
            children.append(child)
            cost = None if cost is None or child.cost is None else cost + child.cost
            totals = _plus(totals, child.usage, child.calls)
        elif record.kind == LogTruncated.KIND:  # what the model calls it replaced used
            removed = record.payload
            assert isinstance(removed, LogTruncated)
            if removed.model_calls:
                cost = None if cost is None or removed.cost is None else cost + removed.cost
                totals = _plus(totals, removed.usage or Usage(), removed.model_calls)
        elif record.kind == ModelCalled.KIND:
            called = record.payload
            assert isinstance(called, ModelCalled)
            models[called.call_id] = called.model
        elif record.kind == AssistantMessageCompleted.KIND:
            completed = record.payload
            assert isinstance(completed, AssistantMessageCompleted)
            if completed.interrupted:
                continue
            usage = completed.usage or Usage()
            call_cost = completed.cost  # as it was priced when answered, or as it was reported
            if call_cost is None:
                model, at = models.get(completed.call_id, ""), datetime.fromisoformat(record.time)
                call_cost = cost_of(model, usage, at=at)
            cost = None if cost is None or call_cost is None else cost + call_cost
            totals = _plus(totals, usage, 1)
    if totals.calls == 0:
        return UsageTotals(children=tuple(children))
    return UsageTotals(
        calls=totals.calls,
        input_tokens=totals.input_tokens,
        output_tokens=totals.output_tokens,
        reasoning_tokens=totals.reasoning_tokens,
        cache_read_tokens=totals.cache_read_tokens,
        cache_write_tokens=totals.cache_write_tokens,
        cost=cost,
        children=tuple(children),
    )


def _plus(totals: UsageTotals, usage: Usage, calls: int) -> UsageTotals:
    return UsageTotals(
        calls=totals.calls + calls,
        input_tokens=_add(totals.input_tokens, usage.input_tokens),
        output_tokens=_add(totals.output_tokens, usage.output_tokens),
        reasoning_tokens=_add(totals.reasoning_tokens, usage.reasoning_tokens),
        cache_read_tokens=_add(totals.cache_read_tokens, usage.cache_read_tokens),
        cache_write_tokens=_add(totals.cache_write_tokens, usage.cache_write_tokens),
    )
