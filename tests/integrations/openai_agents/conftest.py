from collections.abc import Iterator

import pytest

from ...fakes.openai_server import FakeOpenAI


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The fake OpenAI API, where the real openai SDK under the Agents SDK sends its requests."""
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake")
        yield server
