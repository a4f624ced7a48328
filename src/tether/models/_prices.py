"""A small price table for cost estimates; unknown models cost ``None``, never zero."""

from __future__ import annotations

from typing import Final

from tether.messages import Usage

__all__ = ("PRICES", "cost_of")

# US dollars per million tokens: (input, output, cached input), keyed by the pydantic-ai name
# (``provider:model``) as ``TETHER_MODEL`` gives it. Public list prices, for prompts below a
# model's long-context tier; check your provider's page before relying on them.
PRICES: Final[dict[str, tuple[float, float, float]]] = {
    "openai:gpt-4.1": (2.00, 8.00, 0.50),
    "openai:gpt-4.1-mini": (0.40, 1.60, 0.10),
    "openai:gpt-4.1-nano": (0.10, 0.40, 0.025),
    "openai:gpt-4o": (2.50, 10.00, 1.25),
    "openai:gpt-4o-mini": (0.15, 0.60, 0.075),
    "openai:gpt-5": (1.25, 10.00, 0.125),
    "openai:gpt-5-mini": (0.25, 2.00, 0.025),
    "openai:gpt-5-nano": (0.05, 0.40, 0.005),
    "openai:o4-mini": (1.10, 4.40, 0.275),
    "anthropic:claude-sonnet-4-5": (3.00, 15.00, 0.30),
    "anthropic:claude-sonnet-4-0": (3.00, 15.00, 0.30),
    "anthropic:claude-haiku-4-5": (1.00, 5.00, 0.10),
    "anthropic:claude-3-5-sonnet-latest": (3.00, 15.00, 0.30),
    "anthropic:claude-3-5-haiku-latest": (0.80, 4.00, 0.08),
    "google:gemini-2.5-pro": (1.25, 10.00, 0.125),
    "google:gemini-2.5-flash": (0.30, 2.50, 0.03),
    "google:gemini-2.0-flash": (0.10, 0.40, 0.025),
    "google:gemini-1.5-flash": (0.075, 0.30, 0.01875),
    "groq:llama-3.3-70b-versatile": (0.59, 0.79, 0.59),
    # The keyless local models cost nothing.
    "echo": (0.0, 0.0, 0.0),
    "test": (0.0, 0.0, 0.0),
}

# Other spellings of a provider whose prices are the same: another API of it, or an older name.
_SAME_PRICES: Final = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "google-gla": "google",
    "google-vertex": "google",
    "google-cloud": "google",
}


def _price(model: str) -> tuple[float, float, float] | None:
    price = PRICES.get(model)
    if price is None and ":" in model:
        provider, _, name = model.partition(":")
        provider = provider.removeprefix("gateway/")
        price = PRICES.get(f"{_SAME_PRICES.get(provider, provider)}:{name}")
    return price


def cost_of(model: str, usage: Usage) -> float | None:
    """The cost of one call in dollars, or ``None`` if the model or its usage is unknown.

    ``model`` is the name the call was journaled under (``openai:gpt-4.1-mini``); another API
    of the same provider (``openai-chat:``) or an older spelling (``google-gla:``) costs
    the same."""
    price = _price(model)
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    input_price, output_price, cached_price = price
    cached = usage.cache_read_tokens or 0
    fresh = max(usage.input_tokens - cached, 0)
    return (
        fresh * input_price + cached * cached_price + usage.output_tokens * output_price
    ) / 1_000_000
