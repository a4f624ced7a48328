"""Replay offline: an app that builds its provider's client at import, with no key set.

Many apps build a provider client when their module is imported (``AsyncOpenAI()``,
``ChatOpenAI(model=...)``), and those clients refuse to be built without a key. A replay
asks no model: every call it makes is served from the log, and one the log does not hold
diverges before any client is asked. So ``tether replay`` gives each provider key variable
that is unset a placeholder while it loads the app; a request that somehow went out anyway
(code calling a provider outside the journal) would be refused by the provider, never
billed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, MutableMapping
from typing import Final

__all__ = ("OFFLINE_KEY", "PROVIDER_KEY_VARIABLES", "offline_provider_keys")

OFFLINE_KEY: Final = "tether-replay-offline"
PROVIDER_KEY_VARIABLES: Final = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "CO_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "XAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
)


@contextlib.contextmanager
def offline_provider_keys(
    environ: MutableMapping[str, str] | None = None,
) -> Iterator[tuple[str, ...]]:
    """Give each unset provider key variable the placeholder while the block runs (the
    names it set), and take them away again after it."""
    env = os.environ if environ is None else environ
    before = {name: env.get(name) for name in PROVIDER_KEY_VARIABLES}
    missing = tuple(name for name, value in before.items() if not value)
    for name in missing:
        env[name] = OFFLINE_KEY
    try:
        yield missing
    finally:
        for name in missing:
            value = before[name]
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
