"""A real model from one environment variable: ``TETHER_MODEL=openai:gpt-4.1-mini``.

Example::

    from tether.models import EchoModel, model_from_env

    chosen = model_from_env(EchoModel(), default_name="echo")
    spec = agent_spec(chosen.model, model_name=chosen.name, tools=[clock])

Without ``TETHER_MODEL`` the keyless default is used. With it, the string is any pydantic-ai
model name (``openai:…``, ``anthropic:…``, ``google:…``, ``groq:…``, ``ollama:…``), used
through :class:`~tether.models.pydantic_ai.PydanticAIModel`, with the provider's usual key
variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GOOGLE_API_KEY``, ``GROQ_API_KEY``;
``OLLAMA_BASE_URL`` for Ollama). The provider's client is built at the first request, so a
replay, which asks no model, needs no key; :func:`check_model_env` (``tether serve`` and
``tether worker`` call it at startup) builds it at once, so that a bad string, a missing
package or a missing key fails before the first request does.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tether._extras import install_hint
from tether.models._protocol import Model
from tether.models._retry import DEFAULT_MODEL_TIMEOUT

if TYPE_CHECKING:
    from tether.models.pydantic_ai import PydanticAIModel

__all__ = (
    "ModelChoice",
    "ModelConfigError",
    "check_model_env",
    "model_from_env",
    "model_timeout_from_env",
)

MODEL_VARIABLE: Final = "TETHER_MODEL"
"""The environment variable that names the model: ``provider:model``, as pydantic-ai spells it."""
TIMEOUT_VARIABLE: Final = "TETHER_MODEL_TIMEOUT"
"""Seconds a model call may go without a byte of its answer (see :class:`ModelCallPolicy`)."""

# Names older pydantic-ai releases (and their docs) used, for the providers that replaced them.
_ALIASES: Final = {"google-gla": "google", "google-vertex": "google-cloud"}
_EXAMPLE: Final = "openai:gpt-4.1-mini"
_PROVIDERS: Final = ("openai", "anthropic", "google", "groq", "mistral", "ollama")
# A note pydantic-ai appends to a missing-key error, about its own test model: not Tether's way.
_KEYLESS_HINT: Final = "To try Pydantic AI without an API key"
_PASS_IT_IN_CODE: Final = re.compile(r" or pass it via `[^`]*`")

# One model per name, per process: an agent's initializer runs on every claim, and each
# pydantic-ai model owns a provider with an HTTP client (and its pooled connections).
_models: dict[str, PydanticAIModel] = {}


class ModelConfigError(ValueError):
    """``TETHER_MODEL`` names no usable model: an unknown provider, a package or a key that is
    missing (or ``TETHER_MODEL_TIMEOUT`` is no number of seconds). The message is one line,
    starting with the variable and its value."""


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model to use and the name to journal it under (``agent_spec(model_name=...)``,
    which prices its calls: see :func:`~tether.models.cost_of`)."""

    model: Model
    name: str
    from_env: bool
    """Whether ``TETHER_MODEL`` chose it (a real provider), not the keyless default."""


def model_from_env(
    default: Model,
    *,
    default_name: str = "default",
    check: bool = False,
    environ: Mapping[str, str] | None = None,
) -> ModelChoice:
    """The model ``TETHER_MODEL`` names, else ``default`` (named ``default_name``).

    The string is checked at once (its provider is known, its package installed); the key
    only at the first request, unless ``check`` is true, which builds the provider's client
    now. Leave ``check`` false where a replay must work without the key (an agent's
    initializer); call :func:`check_model_env` once at startup instead. Raises
    :class:`ModelConfigError`. ``TETHER_MODEL`` is read from ``environ`` (``os.environ`` by
    default); the provider reads its key and base URL from ``os.environ``, as it always does.
    One model is made per name and process, and shared: its client pools connections.

    Example::

        chosen = model_from_env(EchoModel(), default_name="echo")
        chosen.name   # "openai:gpt-4.1-mini" with TETHER_MODEL=openai:gpt-4.1-mini, else "echo"
    """
    value = (os.environ if environ is None else environ).get(MODEL_VARIABLE, "").strip()
    if not value:
        return ModelChoice(model=default, name=default_name, from_env=False)
    model = _model(value)
    if check:
        _build(value, model)
    return ModelChoice(model=model, name=value, from_env=True)


def check_model_env(
    environ: Mapping[str, str] | None = None, *, build_client: bool = True
) -> str | None:
    """Check ``TETHER_MODEL`` now, key included (the provider's client is built): the name
    it gives, or ``None`` if it is unset. Raises :class:`ModelConfigError`. With
    ``build_client=False`` only the string and the provider's package are checked, as a
    replay needs (no key).

    Example::

        try:
            check_model_env()
        except ModelConfigError as exc:
            sys.exit(f"error: {exc}")
    """
    value = (os.environ if environ is None else environ).get(MODEL_VARIABLE, "").strip()
    if not value:
        return None
    model = _model(value)
    if build_client:
        _build(value, model)
    return value


def model_timeout_from_env(environ: Mapping[str, str] | None = None) -> float:
    """The model call timeout ``TETHER_MODEL_TIMEOUT`` sets, in seconds (``inf``: none),
    else :data:`~tether.models.DEFAULT_MODEL_TIMEOUT` (300). Raises
    :class:`ModelConfigError` for a value that is not a number of seconds above 0.

    Example::

        model_timeout_from_env({"TETHER_MODEL_TIMEOUT": "60"})  # 60.0
    """
    value = (os.environ if environ is None else environ).get(TIMEOUT_VARIABLE, "").strip()
    if not value:
        return DEFAULT_MODEL_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not seconds > 0:  # NaN too
        raise ModelConfigError(
            f"{TIMEOUT_VARIABLE}={value}: not a number of seconds above 0 (inf for no timeout; "
            f"unset it for the default, {DEFAULT_MODEL_TIMEOUT:g} s)"
        )
    return seconds


def _model(value: str) -> PydanticAIModel:
    """The (lazy) model for ``value``, once its provider is known and its package imports."""
    found = _models.get(value)
    if found is not None:
        return found
    try:
        from tether.models.pydantic_ai import PydanticAIModel
    except ImportError as exc:
        raise _error(value, f"{install_hint('pydantic-ai')}: {exc}") from exc
    model = PydanticAIModel(_resolve(value))
    _models[value] = model
    return model


def _resolve(value: str) -> str:
    """The pydantic-ai name for ``value``: its provider known, the provider's package
    importable (neither needs a key)."""
    from pydantic_ai.models import known_model_names
    from pydantic_ai.providers import infer_provider_class

    if value == "test":  # pydantic-ai's keyless test model, which calls every tool offered
        return value
    provider, _, model_name = value.partition(":")
    provider = _ALIASES.get(provider, provider)
    known = known_model_names()
    if not model_name or not provider:
        guesses = sorted((k for k in known if k.endswith(f":{value}")), key=lambda k: "/" in k)
        guess = guesses[0] if guesses else None
        hint = f"; did you mean {guess}?" if guess else ""
        raise _error(value, f"use provider:model (e.g. {_EXAMPLE}){hint}")
    try:
        infer_provider_class(provider)
    except ImportError as exc:  # the provider's SDK: pydantic-ai's message names the extra
        raise _error(value, str(exc)) from exc
    except ValueError as exc:
        providers = sorted({k.partition(":")[0] for k in known if ":" in k} | set(_ALIASES))
        close = difflib.get_close_matches(provider, providers, n=1)
        hint = f"did you mean {close[0]}?" if close else f"e.g. {', '.join(_PROVIDERS)}"
        raise _error(value, f"unknown provider {provider!r} ({hint})") from exc
    return f"{provider}:{model_name}"


def _build(value: str, model: PydanticAIModel) -> None:
    """Build ``model``'s provider client now: the key is checked here."""
    try:
        model.build()
    except Exception as exc:  # pydantic-ai's UserError, an SDK's own error: one line either way
        message = str(exc).split(_KEYLESS_HINT, 1)[0].strip()
        message = _PASS_IT_IN_CODE.sub("", message)  # "... or pass it via `Provider(...)`"
        raise _error(value, message or type(exc).__name__) from exc


def _error(value: str, reason: str) -> ModelConfigError:
    reason = " ".join(reason.split())
    return ModelConfigError(
        f"{MODEL_VARIABLE}={value}: {reason} (unset {MODEL_VARIABLE} for the keyless model)"
    )
