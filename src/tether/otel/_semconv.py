"""The OpenTelemetry GenAI vocabulary of Tether's spans: one spelling of providers, models and
finish reasons, whichever framework made the call.

The journal keeps what each model and framework said (``openai:gpt-4.1`` from pydantic-ai,
``gpt-4.1`` from LangGraph, ``tool_calls`` from OpenAI, ``tool_call`` from pydantic-ai);
spans say it in the conventions' words: the request model as the provider names it
(``gpt-4.1``), ``gen_ai.provider.name`` from the conventions' list (``openai``), and finish
reasons from :data:`FINISH_REASONS`.
"""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = ("FINISH_REASONS", "finish_reason", "model_identity", "provider_name", "submission_ids")

FINISH_REASONS: Final = ("stop", "length", "content_filter", "tool_call", "error")
"""The finish reasons spans report (the conventions' ``FinishReason``, as pydantic-ai has
them); a reason none of these stands for is reported as the model gave it, lowercased."""

_FINISH: Final = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "completed": "stop",
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "model_context_window_exceeded": "length",
    "content_filter": "content_filter",
    "safety": "content_filter",
    "recitation": "content_filter",
    "blocklist": "content_filter",
    "prohibited_content": "content_filter",
    "spii": "content_filter",
    "refusal": "content_filter",
    "tool_call": "tool_call",
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "function_call": "tool_call",
    "error": "error",
    "malformed_function_call": "error",
}

# Provider names as pydantic-ai, LangChain (``ls_provider``) and the Agents SDK spell them →
# the conventions' well-known ``gen_ai.provider.name`` values. Others pass through, lowercased.
_PROVIDERS: Final = {
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "google-gla": "gcp.gemini",
    "google": "gcp.gemini",
    "google_genai": "gcp.gemini",
    "gemini": "gcp.gemini",
    "google-vertex": "gcp.vertex_ai",
    "google-cloud": "gcp.vertex_ai",
    "google_vertexai": "gcp.vertex_ai",
    "vertex_ai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "amazon_bedrock": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai",
    "mistralai": "mistral_ai",
    "grok": "x_ai",
    "xai": "x_ai",
    "moonshotai": "moonshot_ai",
    "watsonx": "ibm.watsonx.ai",
    "ibm": "ibm.watsonx.ai",
}
# pydantic-ai's ``provider:model`` prefixes a name may carry without its client saying so.
_PREFIXES: Final = frozenset(
    {
        *_PROVIDERS,
        "cohere",
        "deepseek",
        "groq",
        "perplexity",
        "ollama",
        "huggingface",
        "cerebras",
        "fireworks",
        "together",
        "openrouter",
        "vercel",
        "heroku",
        "github",
        "litellm",
        "nebius",
        "ovhcloud",
        "alibaba",
        "sambanova",
    }
)
_ROUTERS: Final = ("litellm/", "any-llm/")
"""The Agents SDK's routing prefixes: ``litellm/anthropic/claude-…`` calls Anthropic."""


def finish_reason(reason: str) -> str:
    """``reason`` as one of :data:`FINISH_REASONS` (``tool_calls`` → ``tool_call``,
    ``end_turn`` → ``stop``, ``max_tokens`` → ``length``), else lowercased as it is."""
    lowered = reason.strip().lower()
    return _FINISH.get(lowered, lowered)


def provider_name(provider: str) -> str:
    """A provider as the conventions name it (``google-gla`` → ``gcp.gemini``)."""
    lowered = provider.strip().lower()
    return _PROVIDERS.get(lowered, lowered)


def model_identity(name: str, provider: str | None) -> tuple[str | None, str]:
    """``(gen_ai.provider.name, gen_ai.request.model)`` for a request's model ``name`` and
    the ``provider`` its client says it calls (``None`` if it does not say).

    ``openai:gpt-4.1`` (pydantic-ai), ``openai/gpt-4.1`` (the Agents SDK) and ``gpt-4.1`` from
    an OpenAI client are all ``("openai", "gpt-4.1")``; ``litellm/anthropic/claude-x`` is
    ``("anthropic", "claude-x")``; a name with no provider to tell gives ``(None, name)``.
    """
    model, hint = name, (provider.strip().lower() or None) if provider else None
    for router in _ROUTERS:
        routed, slash, rest = model.removeprefix(router).partition("/")
        if model.startswith(router) and slash and rest:
            model, hint = rest, hint or routed
            break
    head, colon, rest = model.partition(":")
    known = colon and rest and head.lower() in _PREFIXES
    if known and (hint is None or provider_name(head) == provider_name(hint)):
        return provider_name(head), rest  # pydantic-ai's provider:model (openai-chat:gpt-4.1)
    if hint is not None:
        for separator in (":", "/"):
            prefix = hint + separator
            if model.lower().startswith(prefix) and len(model) > len(prefix):
                model = model[len(prefix) :]
                break
    return (provider_name(hint) if hint else None), model


def submission_ids(submission_id: str) -> tuple[int, int]:
    """The trace id of a submission's attempts and the span id of their common parent: derived
    from its id (SHA-256), so every attempt, on any machine, after any crash, finds the same."""
    digest = hashlib.sha256(b"tether.submission\x00" + submission_id.encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1  # all zeros is invalid
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id
