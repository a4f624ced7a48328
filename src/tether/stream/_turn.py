"""What one framework turn hands the emitter: its events, then its usage."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from tether.stream._types import StreamEvent

__all__ = ("HarnessTurn", "TurnResult", "TurnUsage")


class TurnUsage(BaseModel):
    """Usage of one turn. ``None`` means "not reported"; a real 0 stays 0.

    Example::

        TurnUsage(model="gpt-4o", input_tokens=12, output_tokens=0, num_tool_calls=1)
    """

    model_config = ConfigDict(from_attributes=True, validate_by_name=True)

    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    duration_ms: int | None = None
    num_llm_calls: int | None = None
    """Provider-reported; ``None`` when the framework does not say."""
    num_tool_calls: int = 0
    num_reasoning_blocks: int = 0
    """Counted locally, so 0 is a real count."""


class TurnResult(BaseModel):
    final_text: str = ""
    """The last text segment of the turn (text before a tool call is not the answer)."""
    usage: TurnUsage = TurnUsage()


@runtime_checkable
class HarnessTurn(Protocol):
    """One turn of a framework agent: ``events`` streams it; ``usage()`` is valid only after
    ``events`` is exhausted (an async generator cannot return a value)."""

    @property
    def events(self) -> AsyncIterator[StreamEvent]: ...

    def usage(self) -> TurnUsage: ...
