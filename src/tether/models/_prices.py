"""A small price table for cost estimates; unknown models cost ``None``, never zero."""

from __future__ import annotations

from typing import Final

from tether.messages import Usage

__all__ = ("PRICES", "cost_of")

# US dollars per million tokens: (input, output, cached input). Public list prices; check your
# provider's page before relying on them.
PRICES: Final[dict[str, tuple[float, float, float]]] = {
    "openai:gpt-4o": (2.50, 10.00, 1.25),
    "openai:gpt-4o-mini": (0.15, 0.60, 0.075),
    "anthropic:claude-3-5-sonnet-latest": (3.00, 15.00, 0.30),
    "anthropic:claude-3-5-haiku-latest": (0.80, 4.00, 0.08),
    "google-gla:gemini-1.5-flash": (0.075, 0.30, 0.01875),
    # The keyless local models cost nothing.
    "echo": (0.0, 0.0, 0.0),
    "test": (0.0, 0.0, 0.0),
}


def cost_of(model: str, usage: Usage) -> float | None:
    """The cost of one call in dollars, or ``None`` if the model or its usage is unknown."""
    price = PRICES.get(model)
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    input_price, output_price, cached_price = price
    cached = usage.cache_read_tokens or 0
    fresh = max(usage.input_tokens - cached, 0)
    return (
        fresh * input_price + cached * cached_price + usage.output_tokens * output_price
    ) / 1_000_000
