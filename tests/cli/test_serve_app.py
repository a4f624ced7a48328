"""``tether serve --app module:attr`` serving a ``tether.App`` (tests/engine/served_app.py):
one real process shows the App's subagents, env, redactor, schedule and authenticate hook
all at work, as ``Runtime.from_app`` runs them in tests/engine/test_app.py."""

from pathlib import Path

import httpx
import pytest

from ..engine.served_app import APP_KEY, SECRET
from ..processes import eventually
from .conftest import start_server

pytestmark = pytest.mark.process


def test_a_served_app_delegates_greets_redacts_schedules_and_authenticates(
    tmp_path: Path,
) -> None:
    log = tmp_path / "serve.log"
    server = start_server(
        tmp_path / "data",
        log,
        app="tests.engine.served_app:build",
        APP_GREETING="hello from the environment",
    )
    try:
        assert httpx.get(f"{server.url}/sessions", timeout=30).status_code == 401
        with httpx.Client(base_url=server.url, headers={"x-app-key": APP_KEY}, timeout=90) as api:
            boss = api.post("/agents/boss/acme", json={"body": "go"}).json()
            leaky = api.post("/agents/leaky/acme", json={"body": "go"}).json()
            settled = api.get(f"/submissions/{boss['submissionId']}", params={"wait": True})
            assert settled.json()["settlement"]["result"] == (
                "hello from the environment; helper said: helped with lend a hand"
            ), settled.text
            api.get(f"/submissions/{leaky['submissionId']}", params={"wait": True})
            records = api.get("/agents/leaky/acme/records", params={"limit": 1000}).text
            assert SECRET not in records and "[redacted by the app]" in records

            def ticked() -> bool:
                answer = api.get("/agents/helper/ticker/records", params={"limit": 10})
                return answer.status_code == 200 and "tick" in answer.text

            eventually(ticked, log.read_text)
    finally:
        server.stop()
