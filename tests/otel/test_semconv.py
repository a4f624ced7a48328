"""The GenAI vocabulary of the spans: providers, models and finish reasons spelled one way."""

import pytest

from tether.otel._semconv import (
    FINISH_REASONS,
    finish_reason,
    model_identity,
    provider_name,
    submission_ids,
)

from .test_otlp import derived


@pytest.mark.parametrize(
    ("given", "reported"),
    [
        ("stop", "stop"),
        ("end_turn", "stop"),  # Anthropic
        ("STOP", "stop"),  # Gemini
        ("tool_calls", "tool_call"),  # OpenAI, the Agents adapter, Tether's keyless models
        ("tool_call", "tool_call"),  # pydantic-ai
        ("tool_use", "tool_call"),  # Anthropic
        ("length", "length"),
        ("max_tokens", "length"),
        ("MAX_TOKENS", "length"),
        ("content_filter", "content_filter"),
        ("SAFETY", "content_filter"),
        ("error", "error"),
        ("pause_turn", "pause_turn"),  # none of the set: as given, lowercased
    ],
)
def test_finish_reasons(given: str, reported: str) -> None:
    assert finish_reason(given) == reported
    assert reported in FINISH_REASONS or reported == given.lower()


@pytest.mark.parametrize(
    ("name", "provider", "identity"),
    [
        ("openai:gpt-4.1", None, ("openai", "gpt-4.1")),  # pydantic-ai, the built-in agent
        ("openai-chat:gpt-4.1", "openai-chat", ("openai", "gpt-4.1")),
        ("openai-chat:gpt-4.1", "openai", ("openai", "gpt-4.1")),
        ("gpt-4.1", "openai", ("openai", "gpt-4.1")),  # LangGraph's ChatOpenAI
        ("openai/gpt-4.1", "openai", ("openai", "gpt-4.1")),  # the Agents SDK
        ("litellm/anthropic/claude-x", "anthropic", ("anthropic", "claude-x")),
        ("litellm/anthropic/claude-x", None, ("anthropic", "claude-x")),
        ("any-llm/openrouter/openai/gpt-4.1", None, ("openrouter", "openai/gpt-4.1")),
        ("anthropic/claude-x", "openrouter", ("openrouter", "anthropic/claude-x")),
        ("google-gla:gemini-2.5-pro", None, ("gcp.gemini", "gemini-2.5-pro")),
        ("gemini-2.5-pro", "google_genai", ("gcp.gemini", "gemini-2.5-pro")),
        ("ollama:llama3:8b", None, ("ollama", "llama3:8b")),
        ("llama3:8b", "ollama", ("ollama", "llama3:8b")),  # a tag, not a provider
        ("llama3:8b", None, (None, "llama3:8b")),
        ("echo", None, (None, "echo")),  # Tether's keyless model says no provider
        ("mistral:mistral-large", None, ("mistral_ai", "mistral-large")),
    ],
)
def test_model_identity(name: str, provider: str | None, identity: tuple[str | None, str]) -> None:
    assert model_identity(name, provider) == identity


def test_provider_names_follow_the_conventions() -> None:
    assert [provider_name(p) for p in ("OpenAI", "bedrock", "google-vertex", "xai", "acme")] == [
        "openai",
        "aws.bedrock",
        "gcp.vertex_ai",
        "x_ai",
        "acme",
    ]


def test_a_submissions_trace_is_derived_from_its_id() -> None:
    trace_id, span_id = submission_ids("sub-1")
    assert (trace_id, span_id) == submission_ids("sub-1")
    assert (f"{trace_id:032x}", f"{span_id:016x}") == derived("sub-1")
    assert submission_ids("sub-2")[0] != trace_id
