"""``tether serve`` logs Tether's INFO lines (approvals, takeovers, failures), not each request."""

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tether.cli._logs import uvicorn_log_level

from ..processes import eventually
from .conftest import start_server

pytestmark = pytest.mark.process


def test_serve_logs_an_approval_with_its_ids_and_no_access_log(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    server = start_server(tmp_path / "data", log)
    try:
        accepted = httpx.post(
            f"{server.url}/agents/assistant/me",
            json={"body": "email bob@example.com: lunch at noon?"},
            timeout=30,
        ).json()
        approvals = eventually(
            lambda: httpx.get(f"{server.url}/approvals", timeout=30).json()["approvals"],
            log.read_text,
        )
        approval_id = approvals[0]["approvalId"]
        decided = httpx.post(
            f"{server.url}/approvals/{approval_id}",
            json={"decision": "approve", "approver": "ops"},
            timeout=30,
        )
        assert decided.status_code == 200, decided.text
        httpx.get(
            f"{server.url}/submissions/{accepted['submissionId']}",
            params={"wait": True},
            timeout=90,
        )
    finally:
        server.stop()
    text = log.read_text()
    [line] = [line for line in text.splitlines() if f"approval {approval_id} decided" in line]
    assert " INFO tether.engine.events: " in line
    assert f"decided approve by ops submission={accepted['submissionId']} " in line
    assert f"conversation={accepted['conversationId']}" in line
    assert "HTTP/1.1" not in text and "POST /approvals" not in text  # no access log


def test_show_tether_logs_writes_info_to_stderr_without_a_logging_setup() -> None:
    code = (
        "import logging\n"
        "from tether.cli._logs import show_tether_logs\n"
        "show_tether_logs()\n"
        "logging.getLogger('tether.engine.events').info('recovery resume submission=S')\n"
        "logging.getLogger('tether.engine.events').debug('not shown')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "INFO tether.engine.events: recovery resume submission=S" in result.stderr
    assert "not shown" not in result.stderr


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (None, "warning"),
        ("info", "warning"),
        ("DEBUG", "debug"),
        ("error", "error"),
        ("x", "warning"),
    ],
)
def test_uvicorn_stays_at_warning_unless_asked(
    monkeypatch: pytest.MonkeyPatch, setting: str | None, expected: str
) -> None:
    if setting is None:
        monkeypatch.delenv("TETHER_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TETHER_LOG_LEVEL", setting)
    assert uvicorn_log_level() == expected
