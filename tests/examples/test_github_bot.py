"""``examples.github_bot``: its runbook against the keyless model, the GitHub API path
against a fake GitHub on loopback, and a ``kill -9`` while a reply is in flight.

The bot is ``python -m examples.github_bot`` as a real child process. The delivery is the
runbook's own ``issue.json`` and delivery ids (read from the module's docstring), signed as
its ``openssl`` line signs them (one test runs that line).
"""

import ast
import hashlib
import hmac
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..processes import free_port
from .runbook import ROOT, Example, start_example

pytestmark = pytest.mark.process

DOC = ast.get_docstring(ast.parse((ROOT / "examples/github_bot/__init__.py").read_text())) or ""
SECRET = "change-me"
TOKEN = "t0ken-for-the-test"
ISSUE = re.search(r"cat > issue\.json <<'EOF'\n(.*?)\n\s*EOF", DOC, re.DOTALL)
assert ISSUE is not None, "the runbook writes issue.json"
PAYLOAD = ISSUE[1].encode() + b"\n"  # as the here-document writes it
SIGNED, FORGED = re.findall(r"X-GitHub-Delivery: ([\w-]+)", DOC)
SIGNING = re.search(r"^\s*(HMAC=\$\(openssl .*)$", DOC, re.MULTILINE)
SESSION = "/agents/bot/octo.repo"
REPLY = "Thanks for opening this issue, @mona!"


def signature(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def deliver(
    client: httpx.Client, body: bytes, delivery: str, event: str = "issues", sig: str = ""
) -> httpx.Response:
    """A delivery as the runbook's ``curl`` sends it."""
    headers = {
        "content-type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sig or signature(body),
    }
    return client.post("/webhooks/github", content=body, headers=headers)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bot's settings come from the environment: the secret, and no token unless a
    test gives one."""
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", SECRET)
    for name in ("GITHUB_TOKEN", "GITHUB_API_URL"):
        monkeypatch.delenv(name, raising=False)


def start_bot(tmp_path: Path) -> Example:
    """``python -m examples.github_bot`` on a free port, its store and outbox in ``tmp_path``."""
    store = f"sqlite:///{tmp_path / 'data'}"
    outbox_file = str(outbox(tmp_path))
    return start_example("github_bot", store, tmp_path / "bot.log", "--outbox", outbox_file)


def outbox(tmp_path: Path) -> Path:
    return tmp_path / "outbox.jsonl"


def settled(client: httpx.Client, submission_id: str) -> dict[str, Any]:
    view: dict[str, Any] = client.get(
        f"/submissions/{submission_id}", params={"wait": "true", "timeout": "60"}
    ).json()
    assert view["status"] == "settled", view
    return view


def reply_records(client: httpx.Client, kind: str) -> list[dict[str, Any]]:
    page = client.get(f"{SESSION}/records", params={"session": "issue-7"}).json()
    return [r["payload"] for r in page["records"] if r["kind"] == kind]


class FakeGitHub:
    """GitHub's create-a-comment endpoint on 127.0.0.1, recording every request. While
    ``answer`` is clear it holds each request before answering: a reply in flight."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer = threading.Event()
        self.answer.set()
        self.received = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = {name.lower(): value for name, value in self.headers.items()}
                fake.requests.append({"path": self.path, "headers": headers, "body": body})
                fake.received.set()
                fake.answer.wait(60)
                comment = json.dumps({"id": 1, "html_url": "https://github.test/c/1"}).encode()
                try:
                    self.send_response(201)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(comment)))
                    self.end_headers()
                    self.wfile.write(comment)
                except OSError:
                    pass  # the bot was killed while it waited

            def finish(self) -> None:
                try:
                    super().finish()
                except OSError:
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.answer.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def with_token(monkeypatch: pytest.MonkeyPatch, github: FakeGitHub) -> None:
    """The bot posts to the fake GitHub, with a token."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github.url)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the runbook signs with openssl")
def test_the_runbooks_openssl_line_signs_as_github_does(tmp_path: Path) -> None:
    assert SIGNING is not None
    (tmp_path / "issue.json").write_bytes(PAYLOAD)
    script = f'{SIGNING[1]}\nprintf "sha256=%s" "$HMAC"'
    env = {**os.environ, "GITHUB_WEBHOOK_SECRET": SECRET}
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, check=True
    )
    assert done.stdout.decode() == signature(PAYLOAD)


def test_the_runbook_keyless(tmp_path: Path) -> None:
    bot = start_bot(tmp_path)
    with httpx.Client(base_url=bot.url, timeout=90) as client:
        # 1. A signed delivery: a signal to the issue's session, answered with one reply.
        answer = deliver(client, PAYLOAD, SIGNED)
        assert answer.status_code == 202, answer.text
        receipt = answer.json()
        assert receipt["accepted"] is True and receipt["duplicate"] is False
        assert receipt["session"] == "issue-7"
        assert receipt["streamUrl"] == f"{SESSION}?session=issue-7"
        stream = client.get(SESSION, params={"session": "issue-7", "view": "stream"}).text
        assert '"name":"reply"' in stream and '"is_error":false' in stream
        (line,) = outbox(tmp_path).read_text().splitlines()
        (called,) = reply_records(client, "tool_called")
        posted = json.loads(line)
        assert posted["repo"] == "octo/repo" and posted["issue"] == 7
        assert posted["body"].startswith(REPLY)
        assert posted["idempotencyKey"] == called["idempotencyKey"]
        assert settled(client, receipt["submissionId"])["settlement"]["status"] == "succeeded"

        # 2. The redelivery: the same 202, a duplicate, nothing run again.
        again = deliver(client, PAYLOAD, SIGNED)
        assert again.status_code == 202
        assert again.json() == {**receipt, "duplicate": True}

        # 3. A bad signature: 401, nothing admitted.
        forged = deliver(client, PAYLOAD, FORGED, sig="sha256=0000")
        assert forged.status_code == 401
        assert forged.json()["error"]["type"] == "invalid_signature"

        # Nor are a ping or the bot's own comment (it would answer itself).
        ping = deliver(client, b'{"zen": "Keep it logically awesome."}', "ping-1", event="ping")
        own = json.loads(PAYLOAD) | {
            "action": "created",
            "comment": {"body": "Thanks!\n\n<!-- tether:github_bot key=k -->"},
        }
        echo = deliver(client, json.dumps(own).encode(), "own-1", event="issue_comment")
        assert [ping.json()["accepted"], echo.json()["accepted"]] == [False, False]

        client.get(SESSION, params={"session": "issue-7"})  # ends once the session rests
        assert len(outbox(tmp_path).read_text().splitlines()) == 1
        assert len(reply_records(client, "tool_called")) == 1
    bot.stop()


def test_without_a_secret_it_says_so(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "GITHUB_WEBHOOK_SECRET"}
    done = subprocess.run(
        [sys.executable, "-m", "examples.github_bot", "--port", str(free_port())],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert b"error: set GITHUB_WEBHOOK_SECRET" in done.stderr


def test_with_a_token_it_posts_to_github_once_across_a_kill(
    tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_token(monkeypatch, github)
    github.answer.clear()  # the comment is received, its answer held: the reply is in flight
    bot = start_bot(tmp_path)
    with httpx.Client(base_url=bot.url, timeout=90) as client:
        receipt = deliver(client, PAYLOAD, SIGNED).json()
        assert github.received.wait(60), "the bot never posted"
        (called,) = reply_records(client, "tool_called")  # durable before the POST
    (request,) = github.requests
    key = called["idempotencyKey"]
    assert request["path"] == "/repos/octo/repo/issues/7/comments"
    assert request["headers"]["authorization"] == f"Bearer {TOKEN}"
    assert request["headers"]["idempotency-key"] == key
    assert request["body"]["body"].startswith(REPLY)
    assert request["body"]["body"].endswith(f"<!-- tether:github_bot key={key} -->")
    bot.kill()  # kill -9, the POST sent and unanswered
    github.answer.set()

    bot = start_bot(tmp_path)
    with httpx.Client(base_url=bot.url, timeout=90) as client:
        view = settled(client, receipt["submissionId"])
        (outcome,) = reply_records(client, "tool_outcome")
        assert outcome["status"] == "unknown"
        assert view["settlement"]["result"].startswith("I could not confirm my reply on #7")
        assert len(github.requests) == 1  # posted once, before the kill; never again

        # A comment on the issue, answered in the same session: posted, and confirmed.
        comment = json.loads(PAYLOAD) | {
            "action": "created",
            "comment": {"body": "Still crashes.", "user": {"login": "mona"}},
        }
        receipt = deliver(client, json.dumps(comment).encode(), "c-1", "issue_comment").json()
        view = settled(client, receipt["submissionId"])
        assert view["settlement"]["result"] == "Replied on #7: posted https://github.test/c/1"
    assert len(github.requests) == 2
    assert github.requests[1]["body"]["body"].startswith("Thanks, @mona: noted.")
    assert not outbox(tmp_path).exists()  # the outbox is for keyless replies only
    bot.stop()
