from collections.abc import Iterator

import pytest

from ..engine.conftest import FAST, make_runtime
from ..fakes.openai_server import FakeOpenAI

__all__ = ("FAST", "fake", "make_runtime")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The fake OpenAI API, where the frameworks' real provider clients (the openai SDK under
    them) send their requests: ``$OPENAI_BASE_URL`` points there."""
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake")
        yield server
