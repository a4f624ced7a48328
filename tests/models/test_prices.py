"""Cost estimates from the price table: known models priced, unknown ones (or usage) None."""

import pytest

from tether.messages import Usage
from tether.models import cost_of


def test_cost_of_a_known_model() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=500_000)
    assert cost_of("openai:gpt-4o", usage) == pytest.approx(0.5 * 2.5 + 0.5 * 1.25 + 10.0)
    assert cost_of("openai:gpt-4o", Usage()) is None


def test_an_unknown_model_costs_none_not_zero() -> None:
    usage = Usage(input_tokens=10, output_tokens=10)
    assert cost_of("someone:else", usage) is None
    assert cost_of("echo", usage) == 0.0
