"""``TETHER_MODEL`` at startup: ``serve`` and ``worker`` refuse a model they cannot use (an
unknown provider, a missing package or key) in one line on stderr, with exit code 10, before
anything starts; ``replay`` refuses a bad name the same way, but never builds the provider's
client, so it needs no key."""

import importlib.util
from pathlib import Path

import pytest

from tether.cli._exit import ExitCode

from .command import tether

pytestmark = pytest.mark.process


@pytest.fixture(autouse=True)
def _no_provider_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TETHER_MODEL", "TETHER_MODEL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)


COMMANDS = [
    ["serve", "--demo", "--port", "0", "--store", "memory://"],
    ["worker", "--demo", "--store", "memory://"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=["serve", "worker"])
@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ("nosuchprovider:model", "unknown provider 'nosuchprovider'"),
        ("gpt-4.1-mini", "use provider:model (e.g. openai:gpt-4.1-mini)"),
        ("openai:gpt-4.1-mini", "Set the `OPENAI_API_KEY` environment variable"),
    ],
    ids=["unknown-provider", "no-provider", "missing-key"],
)
def test_a_bad_model_fails_at_startup_in_one_line(
    command: list[str], model: str, reason: str
) -> None:
    failed = tether(*command, code=ExitCode.BAD_MODEL, TETHER_MODEL=model)
    assert failed.error.startswith(f"error: TETHER_MODEL={model}: ") and reason in failed.error
    assert "Traceback" not in failed.stderr and "tether serving" not in failed.stdout


@pytest.mark.parametrize("timeout", ["soon", "0", "-5"])
def test_a_bad_model_timeout_fails_at_startup_in_one_line(timeout: str) -> None:
    failed = tether(*COMMANDS[1], code=ExitCode.BAD_MODEL, TETHER_MODEL_TIMEOUT=timeout)
    assert failed.error == (
        f"error: TETHER_MODEL_TIMEOUT={timeout}: not a number of seconds above 0 (inf for no "
        "timeout; unset it for the default, 300 s)"
    )


def test_a_missing_provider_package_names_the_extra() -> None:
    if importlib.util.find_spec("anthropic") is not None:
        pytest.skip("the anthropic SDK is installed here")
    failed = tether(
        *COMMANDS[0], code=ExitCode.BAD_MODEL, TETHER_MODEL="anthropic:claude-sonnet-4-5"
    )
    assert 'pip install "pydantic-ai-slim[anthropic]"' in failed.error


def test_replay_refuses_a_bad_name_but_needs_no_key(tmp_path: Path) -> None:
    replay = ["replay", "c-1", "--demo", "--store", f"sqlite:///{tmp_path / 'none'}"]
    failed = tether(*replay, code=ExitCode.BAD_MODEL, TETHER_MODEL="nosuchprovider:model")
    assert failed.error.startswith("error: TETHER_MODEL=nosuchprovider:model: unknown provider")
    # No OPENAI_API_KEY: past the model check, to the store (which is not there).
    failed = tether(*replay, code=ExitCode.NO_STORE, TETHER_MODEL="openai:gpt-4.1-mini")
    assert "TETHER_MODEL" not in failed.error and "no store at" in failed.error
