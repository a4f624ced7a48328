"""``tether sessions`` and ``tether delete`` against a real ``tether serve``."""

import httpx
import pytest

from .command import tether
from .conftest import ServerProcess

pytestmark = pytest.mark.process


def test_sessions_lists_and_delete_erases(server: ServerProcess) -> None:
    for session in ("one", "two"):
        tether(
            "send", "assistant", "me", "hello", "--session", session, "--wait", "--url", server.url
        )
    listed = tether("sessions", "--url", server.url, real=True).stdout
    assert listed.index("assistant/me/two") < listed.index("assistant/me/one")  # newest first
    assert "idle" in listed
    paged = tether("sessions", "--limit", "1", "--url", server.url).stdout
    assert "assistant/me/two" in paged and "more: add --cursor" in paged
    erased = tether("delete", "assistant", "me", "--session", "one", "--url", server.url).stdout
    assert erased.startswith("erased assistant/me/one") and "1 submissions" in erased
    assert "assistant/me/one" not in tether("sessions", "--url", server.url).stdout
    missing = tether("delete", "assistant", "me", "--session", "one", "--url", server.url, code=1)
    assert "not found" in missing.error
    bad = tether("sessions", "--instance", "me", "--url", server.url, code=1)
    assert "needs its agent" in bad.error


def test_sessions_prints_each_conversation_id_whole(server: ServerProcess) -> None:
    """The id ``tether export``, ``verify``, ``replay`` and ``fork`` take, on an 80-column
    pipe: the line of each session holds it, neither cut nor wrapped."""
    for session in ("default", "a-session-name-long-enough-to-crowd-the-table"):
        tether("send", "assistant", "me", "hello", "--session", session, "--url", server.url)
    listed = httpx.get(f"{server.url}/sessions").json()["sessions"]
    shown = tether("sessions", "--usage", "--url", server.url, COLUMNS="80").stdout.splitlines()
    for item in listed:
        [line] = [line for line in shown if f"assistant/me/{item['session']}" in line]
        assert item["conversationId"] in line.split(), shown
