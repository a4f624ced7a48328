"""Each integration's refusals are its own classes under one base each in ``tether.errors``:
one ``except`` catches every framework's, and an ``except`` on an integration's own name
still works."""

import importlib

import pytest

from tether import errors


@pytest.mark.parametrize(
    ("integration", "names"),
    [
        ("pydantic_ai", ("UnsupportedConstruct", "NotJournaled")),
        ("langgraph", ("UnsupportedConstruct", "NotJournaled")),
        ("openai_agents", ("UnsupportedConstruct",)),
    ],
)
def test_every_integrations_refusal_is_caught_by_its_base(
    integration: str, names: tuple[str, ...]
) -> None:
    module = importlib.import_module(f"tether.integrations.{integration}")
    for name in names:
        own = getattr(module, name)
        base = getattr(errors, name)
        assert own is not base and issubclass(own, base)
        with pytest.raises(base) as caught:
            raise own("refused")
        assert caught.value.code == base.code
    assert errors.UnsupportedConstruct.code == "unsupported_construct"
    assert issubclass(errors.UnsupportedConstruct, ValueError)
    assert issubclass(errors.UnsupportedConstruct, errors.TetherError)
    assert issubclass(errors.NotJournaled, errors.JournalError) and issubclass(
        errors.NotJournaled, RuntimeError
    )
