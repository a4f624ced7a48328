"""``TETHER_MODEL``: the keyless default without it; with it, a pydantic-ai model whose
provider's client is built at the first request (or by a check), so that a bad string fails
at once, a missing key fails a check in one clear line, and a replay needs no key."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tether.errors import ModelFatalError
from tether.messages import Message, ModelRequest
from tether.models import (
    EchoModel,
    ModelChoice,
    ModelConfigError,
    _env,
    check_model_env,
    model_from_env,
)
from tether.models.pydantic_ai import PydanticAIModel


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No key, no base URL, no TETHER_MODEL; and no model kept from another test."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TETHER_MODEL"):
        monkeypatch.delenv(name, raising=False)
    _env._models.clear()
    yield
    _env._models.clear()


def chosen(value: str, *, check: bool = False) -> ModelChoice:
    return model_from_env(
        EchoModel(), default_name="echo", check=check, environ={"TETHER_MODEL": value}
    )


def test_without_it_the_keyless_default() -> None:
    default = EchoModel()
    for environ in ({}, {"TETHER_MODEL": ""}, {"TETHER_MODEL": "  "}):
        picked = model_from_env(default, default_name="echo", environ=environ)
        assert picked == ModelChoice(model=default, name="echo", from_env=False)
    assert check_model_env({}) is None


def test_a_model_string_is_a_lazy_pydantic_ai_model_that_needs_no_key() -> None:
    picked = chosen("openai:gpt-4.1-mini")  # no OPENAI_API_KEY: nothing is built yet
    assert picked.from_env and picked.name == "openai:gpt-4.1-mini"
    assert isinstance(picked.model, PydanticAIModel)
    assert picked.model.model_name == "gpt-4.1-mini"
    assert chosen("openai:gpt-4.1-mini").model is picked.model  # one per name and process


def test_os_environ_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_MODEL", "openai:gpt-4.1-mini")
    assert model_from_env(EchoModel()).name == "openai:gpt-4.1-mini"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("gpt-4.1-mini", "use provider:model (e.g. openai:gpt-4.1-mini)"),
        ("openai:", "use provider:model"),
        (":gpt-4.1-mini", "use provider:model"),
        ("opena:gpt-4.1-mini", "unknown provider 'opena' (did you mean openai?)"),
        ("nosuchthing:model", "unknown provider 'nosuchthing' (e.g. openai, anthropic"),
    ],
)
def test_a_bad_string_fails_at_once_in_one_line(value: str, reason: str) -> None:
    with pytest.raises(ModelConfigError) as raised:
        chosen(value)
    message = str(raised.value)
    assert message.startswith(f"TETHER_MODEL={value}: ") and reason in message
    assert "\n" not in message and message.endswith("(unset TETHER_MODEL for the keyless model)")
    with pytest.raises(ModelConfigError):
        check_model_env({"TETHER_MODEL": value})


def test_a_missing_provider_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if not installed: import fails
    monkeypatch.delitem(sys.modules, "pydantic_ai.providers.anthropic", raising=False)
    with pytest.raises(ModelConfigError) as raised:
        chosen("anthropic:claude-sonnet-4-5")
    message = str(raised.value)
    assert message.startswith("TETHER_MODEL=anthropic:claude-sonnet-4-5: ")
    assert 'pip install "pydantic-ai-slim[anthropic]"' in message and "\n" not in message


def test_a_missing_key_fails_the_check_in_one_clear_line() -> None:
    with pytest.raises(ModelConfigError) as raised:
        chosen("openai:gpt-4.1-mini", check=True)
    message = str(raised.value)
    assert message == (
        "TETHER_MODEL=openai:gpt-4.1-mini: Set the `OPENAI_API_KEY` environment variable to "
        "use the OpenAI provider. (unset TETHER_MODEL for the keyless model)"
    )
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        check_model_env({"TETHER_MODEL": "openai:gpt-4.1-mini"})
    # What a replay checks: the name and the package, not the key.
    assert check_model_env({"TETHER_MODEL": "openai:gpt-4.1-mini"}, build_client=False) == (
        "openai:gpt-4.1-mini"
    )


def test_with_the_key_the_check_builds_the_client_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert check_model_env({"TETHER_MODEL": "openai:gpt-4.1-mini"}) == "openai:gpt-4.1-mini"
    picked = chosen("openai:gpt-4.1-mini", check=True)
    assert isinstance(picked.model, PydanticAIModel)
    built = picked.model.build()
    assert built is picked.model.build() and built.model_name == "gpt-4.1-mini"


async def test_a_model_whose_key_is_missing_fails_its_first_request_as_fatal() -> None:
    model = chosen("openai:gpt-4.1-mini").model
    request = ModelRequest(model="openai:gpt-4.1-mini", messages=(Message.user("hi"),))
    with pytest.raises(ModelFatalError, match="OPENAI_API_KEY"):
        await model.request(request)


def test_older_provider_names_are_accepted() -> None:
    try:
        picked = chosen("google-gla:gemini-2.5-flash")
    except ModelConfigError as exc:  # google-genai is not installed here
        assert "pydantic-ai-slim[google]" in str(exc)
    else:
        assert isinstance(picked.model, PydanticAIModel)
        assert picked.name == "google-gla:gemini-2.5-flash"  # journaled as given
        assert picked.model._name == "google:gemini-2.5-flash"  # resolved for pydantic-ai
