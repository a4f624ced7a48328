"""A call's cost, priced by genai-prices: the 20 models Tether's own table listed cost what
it said below their long-context tier, under any of a provider's names; what the table could
not say (a long prompt's tier, a cache write, a model it did not list) is priced too; an
unknown model or usage costs ``None``, never zero."""

import sys
from datetime import UTC, datetime

import pytest

from tether.messages import Usage
from tether.models import cost_of

MILLION = 1_000_000

# The table genai-prices replaced: dollars per million tokens (input, output, cached input).
FORMER_TABLE = {
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
}


@pytest.mark.parametrize(("model", "prices"), FORMER_TABLE.items())
def test_the_former_table_s_models_cost_what_it_said(
    model: str, prices: tuple[float, float, float]
) -> None:
    """A 100k-token prompt, 40k of it cached, and a 1,000-token answer: below every model's
    long-context tier."""
    input_price, output_price, cached_price = prices
    usage = Usage(input_tokens=100_000, output_tokens=1_000, cache_read_tokens=40_000)
    expected = (60_000 * input_price + 40_000 * cached_price + 1_000 * output_price) / MILLION
    assert cost_of(model, usage) == pytest.approx(expected)


def test_the_price_of_a_model_under_any_of_its_provider_s_names() -> None:
    usage = Usage(input_tokens=MILLION, output_tokens=MILLION, cache_read_tokens=MILLION)
    assert cost_of("openai:gpt-4.1-mini", usage) == pytest.approx(0.10 + 1.60)
    for name in ("openai-chat", "openai-responses", "gateway/openai"):
        assert cost_of(f"{name}:gpt-4.1-mini", usage) == cost_of("openai:gpt-4.1-mini", usage)
    assert cost_of("google-gla:gemini-2.5-flash", usage) == cost_of(
        "google:gemini-2.5-flash", usage
    )
    # A model's own name (as the OpenAI Agents SDK journals it): its provider is found.
    assert cost_of("gpt-4.1-mini", usage) == cost_of("openai:gpt-4.1-mini", usage)


def test_a_long_prompt_and_a_cache_write_are_priced_as_the_provider_bills_them() -> None:
    short = cost_of("google:gemini-2.5-pro", Usage(input_tokens=100_000, output_tokens=0))
    long = cost_of("google:gemini-2.5-pro", Usage(input_tokens=300_000, output_tokens=0))
    assert short is not None and long is not None
    assert long / 300_000 > short / 100_000  # past 200k tokens every input token costs more
    written = cost_of(
        "anthropic:claude-sonnet-4-5",
        Usage(input_tokens=10_000, output_tokens=0, cache_write_tokens=10_000),
    )
    fresh = cost_of("anthropic:claude-sonnet-4-5", Usage(input_tokens=10_000, output_tokens=0))
    assert written is not None and fresh is not None
    assert written == pytest.approx(1.25 * fresh)  # a 5-minute cache write


def test_a_price_in_force_when_the_call_was_made() -> None:
    usage = Usage(input_tokens=2_000, output_tokens=300)
    made = datetime(2025, 9, 1, tzinfo=UTC)
    assert cost_of("openai:gpt-4.1", usage, at=made) == pytest.approx(
        (2_000 * 2.00 + 300 * 8.00) / MILLION
    )


@pytest.mark.parametrize(
    ("model", "usage"),
    [
        ("openai:gpt-no-such-model", Usage(input_tokens=1, output_tokens=1)),
        ("no-such-provider:gpt-4.1", Usage(input_tokens=1, output_tokens=1)),
        ("openai:gpt-4.1", Usage(input_tokens=None, output_tokens=1)),
        ("openai:gpt-4.1", Usage(input_tokens=1, output_tokens=None)),
        # More cached tokens than input tokens: a usage no price applies to.
        ("openai:gpt-4.1", Usage(input_tokens=10, output_tokens=1, cache_read_tokens=100)),
        ("echo", Usage()),
    ],
)
def test_an_unknown_cost_is_none_never_zero(model: str, usage: Usage) -> None:
    assert cost_of(model, usage) is None


def test_the_local_models_cost_nothing() -> None:
    for model in ("echo", "test"):
        assert cost_of(model, Usage(input_tokens=10, output_tokens=5)) == 0.0


def test_without_genai_prices_only_the_local_models_have_a_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # as if the extra were absent
    usage = Usage(input_tokens=7_777, output_tokens=77)  # priced by no other test: not cached
    assert cost_of("openai:gpt-4.1-mini", usage) is None
    assert cost_of("echo", usage) == 0.0
