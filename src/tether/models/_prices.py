"""The cost of a model call, from genai-prices; an unknown model costs ``None``, never zero.

genai-prices (the pydantic team's, a dependency of pydantic-ai) keeps the list prices of
some thousand models over time, with long-context tiers and cache writes, and is released as
providers change them: a table of Tether's own went stale and knew 20 models. It is an
optional dependency (the ``pydantic-ai``, ``langgraph`` and ``openai-agents`` extras bring it);
without it every call but the keyless local models' costs ``None``.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Final

from tether.messages import Usage

__all__ = ("cost_of",)

_LOCAL_MODELS: Final = frozenset({"echo", "test"})
"""The keyless models that answer in process: they cost nothing."""


def cost_of(model: str, usage: Usage, *, at: datetime | None = None) -> float | None:
    """The cost of one call in dollars, or ``None`` if the model, its price or its usage is
    unknown.

    ``model`` is the name the call was journaled under: ``provider:model`` as ``TETHER_MODEL``
    gives it (any of a provider's names: ``openai-chat:``, ``google-gla:``, ``gateway/openai:``)
    or a model's own name, whose provider is then guessed. ``at`` is when the call was made
    (now if not given): a price in force then. ``usage.input_tokens`` counts cached input too.

        >>> cost_of("openai:gpt-4.1-mini", Usage(input_tokens=1_000_000, output_tokens=0))
        0.4
    """
    if usage.input_tokens is None or usage.output_tokens is None:
        return None
    if model in _LOCAL_MODELS:
        return 0.0
    return _priced(
        model,
        at,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens or 0,
        usage.cache_write_tokens or 0,
    )


@functools.lru_cache(maxsize=16384)
def _priced(
    model: str,
    at: datetime | None,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int,
    cache_write_tokens: int,
) -> float | None:
    # A log's totals are summed again on every read of its usage (the console polls them),
    # and genai-prices takes ~150 µs a call: each call is priced once per process.
    try:
        from genai_prices import Usage as PricedUsage
        from genai_prices import calc_price
    except ImportError:
        return None
    provider, colon, name = model.partition(":")
    if not colon:
        provider, name = "", model
    try:
        priced = calc_price(
            PricedUsage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=cache_read_tokens,
                cache_write_tokens=cache_write_tokens,
            ),
            name,
            provider_id=provider.removeprefix("gateway/") or None,
            genai_request_timestamp=at,
        )
    except LookupError:  # a model or provider it does not know
        return None
    except ValueError:  # usage no price applies to (more cached tokens than input tokens)
        return None
    return float(priced.total_price)
