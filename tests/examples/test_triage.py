"""``examples.triage``: its runbook, run against the keyless model.

The server is ``python -m examples.triage`` as a real child process; the requests are the
runbook's own (its ``curl -XPOST ... <<'EOF'`` bodies, read from the module's docstring), so
the runbook cannot drift from what is tested.
"""

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from .runbook import ROOT, start_example

POST = re.compile(
    r"curl -s -XPOST 'localhost:\d+(?P<path>[^']+)'.*?<<'EOF'\n(?P<body>.*?)\n\s*EOF", re.DOTALL
)


def runbook_posts() -> list[tuple[str, dict[str, Any]]]:
    """The runbook's POSTs, in order: each one's path and JSON body."""
    doc = ast.get_docstring(ast.parse((ROOT / "examples" / "triage" / "__init__.py").read_text()))
    return [(m["path"], json.loads(m["body"])) for m in POST.finditer(doc or "")]


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, data)`` frames of an SSE body."""
    frames = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            frames.append((fields.get("event", "message"), json.loads(fields["data"])))
    return frames


def texts(stream: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    """The stream's whole text messages: ``(author, content)``."""
    return [
        (content["author"], content["content"])
        for event, data in stream
        if event == "full" and (content := data["content"])["type"] == "text"
    ]


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """``python -m examples.triage`` on a free port and a fresh SQLite store: its URL."""
    example = start_example("triage", f"sqlite:///{tmp_path / 'data'}", tmp_path / "triage.log")
    yield example.url
    example.stop()


def test_the_runbook(server: str) -> None:
    posts = runbook_posts()
    assert [path for path, _ in posts] == [
        "/agents/triage/t-1001?wait=true",
        "/agents/triage/t-1002?wait=true",
    ]
    (ticket_path, ticket), (strict_path, strict) = posts
    with httpx.Client(base_url=server, timeout=90) as client:
        # 1. The ticket settles with JSON that validates.
        answer = client.post(ticket_path, json=ticket)
        assert answer.status_code == 200, answer.text
        settled = answer.json()
        assert settled["status"] == "succeeded", settled
        jsonschema.validate(settled["result"], ticket["resultSchema"])
        assert settled["result"] == {
            "category": "bug",
            "priority": "urgent",
            "summary": "the CSV export crashes the app since this morning.",
        }

        # 2. The stream shows the invalid first answer, the correction, the valid answer.
        stream = sse(client.get("/agents/triage/t-1001", params={"view": "stream"}).text)
        calls = [
            data["content"]
            for event, data in stream
            if event == "full" and data["content"]["type"] == "tool_request"
        ]
        assert [(c["name"], c["arguments"]["agent"]) for c in calls] == [("task", "researcher")]
        said = texts(stream)
        assert [author for author, _ in said] == ["user", "agent", "user", "agent"]
        (_, body), (_, first), (_, correction), (_, final) = said
        assert body == ticket["body"]
        assert not is_json(first)
        assert "did not match the required JSON Schema" in correction
        assert json.loads(final) == settled["result"]

        # 3. The researcher ran as a child submission, in the tree.
        tree = client.get(f"/submissions/{settled['submissionId']}/tree").json()
        assert tree["agent"] == "triage"
        (child,) = tree["children"]
        assert child["agent"] == "researcher"
        assert child["settlement"]["status"] == "succeeded"
        assert "enterprise plan" in child["settlement"]["result"]

        # 4. A schema the model never meets, one retry: the typed failure.
        answer = client.post(strict_path, json=strict)
        assert answer.status_code == 200, answer.text
        failed = answer.json()
        assert failed["status"] == "failed", failed
        assert failed["errorCode"] == "result_schema_invalid"
        assert failed["error"] == "'assignee' is a required property"
        said = texts(sse(client.get("/agents/triage/t-1002", params={"view": "stream"}).text))
        tries = [content for author, content in said if author == "agent"]
        assert len(tries) == 2  # the first answer and the one corrective retry
        assert not is_json(tries[0]) and "assignee" not in json.loads(tries[1])
