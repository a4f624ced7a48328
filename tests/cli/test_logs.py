"""``tether serve`` logs Tether's INFO lines (approvals, takeovers, failures), not each request,
as text or as JSON lines (``--log-format``), at ``--log-level``."""

import contextlib
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tether.cli._jsonlog import JsonFormatter
from tether.cli._logs import LogFormat, LogLevel, show_tether_logs, uvicorn_log_level

from ..processes import eventually, free_port, reap, start, wait_ready_blocking
from .conftest import TETHER, cli_env, start_server

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
    ("level", "expected"),
    [
        (LogLevel.DEBUG, "debug"),
        (LogLevel.INFO, "warning"),
        (LogLevel.WARNING, "warning"),
        (LogLevel.ERROR, "error"),
    ],
)
def test_uvicorn_stays_at_warning_unless_asked(level: LogLevel, expected: str) -> None:
    assert uvicorn_log_level(level) == expected


def test_serve_logs_json_lines_with_the_ids_of_a_settled_run(tmp_path: Path) -> None:
    errors, out = tmp_path / "serve.err", tmp_path / "serve.out"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with errors.open("ab") as err, out.open("ab") as stdout:
        process = start(
            [
                *TETHER,
                *("serve", "--demo", "--store", f"sqlite:///{tmp_path / 'data'}"),
                *("--port", str(port), "--log-format", "json", "--log-level", "debug"),
            ],
            stdout=stdout,
            stderr=err,
            env=cli_env(),
        )
    try:
        wait_ready_blocking(url, process, errors)
        settled = httpx.post(
            f"{url}/agents/assistant/me",
            params={"wait": True},
            json={"body": "hello", "session": "logs"},
            timeout=90,
        ).json()
    finally:
        reap(process)
    assert settled["status"] == "succeeded", settled
    lines = [json.loads(line) for line in errors.read_text().splitlines()]  # each one JSON
    assert lines and all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    [settle] = [
        line
        for line in lines
        if line["logger"] == "tether.engine.events"
        and line["message"].startswith("settled succeeded")
    ]
    assert settle["level"] == "DEBUG"
    assert settle["submission_id"] == settled["submissionId"]
    assert settle["conversation_id"] == settled["conversationId"]
    assert settle["session"] == "assistant/me/logs"
    assert settle["attempt_id"]
    # uvicorn's access log goes through the same formatter, its request as fields.
    [access] = [line for line in lines if line.get("method") == "POST"]
    assert access["logger"] == "uvicorn.access" and access["status"] == 200
    assert access["path"] == "/agents/assistant/me?wait=true"
    assert out.read_text().startswith("tether serving ")  # the one line on stdout


def _format(record: logging.LogRecord) -> dict[str, object]:
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed: dict[str, object] = json.loads(line)
    return parsed


def test_json_lines_put_the_ids_first_and_leave_out_what_has_no_value() -> None:
    record = logging.LogRecord(
        "tether.engine.events", logging.INFO, __file__, 1, "recovery %s\nnext", ("resume",), None
    )
    fields = {
        "approval_id": "A",
        "attempt_id": None,
        "session": "assistant/me/default",
        "submission_id": "S",
        "when": Path("x"),
    }
    for name, value in fields.items():
        setattr(record, name, value)
    parsed = _format(record)
    assert list(parsed) == [
        "ts", "level", "logger", "message", "submission_id", "session", "approval_id", "when"
    ]  # fmt: skip
    assert parsed["message"] == "recovery resume\nnext"
    assert parsed["level"] == "INFO" and parsed["when"] == "x"
    assert str(parsed["ts"]).endswith("+00:00")


def test_json_lines_carry_a_traceback_and_uvicorns_request() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logging.LogRecord(
            "tether.engine", logging.ERROR, __file__, 1, "crashed", (), sys.exc_info()
        )
    parsed = _format(failed)
    assert "ValueError: boom" in str(parsed["exc_info"])
    access = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/healthz", "1.1", 200),
        None,
    )
    parsed = _format(access)
    assert parsed["message"] == '127.0.0.1:5000 - "GET /healthz HTTP/1.1" 200'
    assert (parsed["method"], parsed["path"], parsed["status"]) == ("GET", "/healthz", 200)


@contextlib.contextmanager
def _shown(log_format: LogFormat, level: LogLevel) -> Iterator[io.StringIO]:
    """What ``show_tether_logs`` writes to stderr, called on a root logger with no handler;
    pytest's own handlers (put on for each phase of a test) are put back after."""
    root, tether = logging.getLogger(), logging.getLogger("tether")
    saved = root.handlers[:], tether.handlers[:], tether.level, sys.stderr
    root.handlers.clear()
    tether.handlers.clear()
    sys.stderr = captured = io.StringIO()
    try:
        show_tether_logs(log_format, level)
        yield captured
    finally:
        root.handlers[:], tether.handlers[:] = saved[0], saved[1]
        tether.setLevel(saved[2])
        sys.stderr = saved[3]
        logging.captureWarnings(False)


@pytest.mark.parametrize(
    ("level", "shown"),
    [
        (LogLevel.DEBUG, ["debug", "info", "warning", "error"]),
        (LogLevel.INFO, ["info", "warning", "error"]),
        (LogLevel.WARNING, ["warning", "error"]),
        (LogLevel.ERROR, ["error"]),
    ],
)
def test_the_level_filters_tethers_lines(level: LogLevel, shown: list[str]) -> None:
    with _shown(LogFormat.JSON, level) as stderr:
        logger = logging.getLogger("tether.engine.events")
        for name in ("debug", "info", "warning", "error"):
            logger.log(logging.getLevelNamesMapping()[name.upper()], name)
    lines = [json.loads(line) for line in stderr.getvalue().splitlines()]
    assert [line["message"] for line in lines] == shown
    assert {line["logger"] for line in lines} == {"tether.engine.events"}


def test_text_stays_one_line_of_time_level_logger_and_message() -> None:
    with _shown(LogFormat.TEXT, LogLevel.INFO) as stderr:
        logging.getLogger("tether.engine.events").info("recovery resume submission=S")
        logging.getLogger("uvicorn.error").warning("uvicorn says")  # the same handler
    # Only these two loggers' lines: under load, a thread a previous test of this process
    # left closing (a store's writer, say) may log through the same root handler meanwhile.
    ours = (" tether.engine.events: ", " uvicorn.error: ")
    lines = stderr.getvalue().splitlines()
    first, second = [line for line in lines if any(name in line for name in ours)]
    assert first.endswith(" INFO tether.engine.events: recovery resume submission=S")
    assert second.endswith(" WARNING uvicorn.error: uvicorn says")


@pytest.mark.parametrize("value", ["yaml", ""])
def test_an_unknown_log_format_is_refused_in_one_line(value: str) -> None:
    result = subprocess.run(
        [*TETHER, "worker", "--demo", "--log-format", value],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(),
    )
    assert result.returncode == 2, result.stderr
    assert "--log-format" in result.stderr and "Traceback" not in result.stderr
