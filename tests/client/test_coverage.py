"""Every operation of ``/openapi.json`` (its snapshot, tests/http/openapi_snapshot.json) has
the client's description, save the console's sign-in: a route added to the server without
one fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tether.client import Call
from tether.client import _operations as op
from tether.http import ScheduleBody, UpgradeBody

SNAPSHOT = Path(__file__).parents[1] / "http" / "openapi_snapshot.json"
BROWSER_ONLY = {"POST /ui/login", "POST /ui/logout"}
STREAMS = {"GET /agents/{agent}/{instance}"}
"""Followed by ``stream`` and ``stream_records`` (tests/client/test_stream.py)."""
CHAT_PROTOCOLS = {
    "POST /agents/{agent}/{instance}/ag-ui",
    "POST /agents/{agent}/{instance}/ai-sdk",
    "GET /agents/{agent}/{instance}/ai-sdk/{chat_id}/stream",
}
"""AG-UI's and the AI SDK's own clients post there (tests/http/test_chat_clients.py)."""


def described() -> list[Call[Any]]:
    """A call of every operation the client describes in one request."""
    return [
        op.dispatch("a", "i", "hi"),
        op.steer("a", "i", "hi"),
        op.follow_up("a", "i", "hi"),
        op.abort("a", "i"),
        op.compact("a", "i"),
        op.erase("a", "i"),
        op.sessions(),
        op.patch_metadata("a", "i", {"k": "v"}),
        op.records("a", "i"),
        op.messages("a", "i"),
        op.conversation("a", "i"),
        op.open_submissions("a", "i"),
        op.submission("s"),
        op.abort_submission("s"),
        op.submission_tree("s"),
        op.fork("c", 1),
        op.verify("c"),
        op.export("c"),
        op.spans("c"),
        op.conversation_usage("c"),
        op.usage(),
        op.approvals(),
        op.decide("g", "approve"),
        op.inputs(),
        op.answer("g", 1),
        op.budgets(),
        op.decide_budget("g", "approve"),
        op.agents(),
        op.schedules(),
        op.add_schedule(ScheduleBody(agent="a", instance="i", body="b", every=60)),
        op.delete_schedule("s"),
        op.versions(),
        op.upgrade_versions(UpgradeBody(agent="a", from_version="1", to_version="2")),
        op.webhook_deliveries(),
        op.webhook_delivery("w"),
        op.resend_webhook("w"),
        op.me(),
        op.alive(),
        op.ready(),
        op.metrics(),
    ]


def _matches(template: str, path: str) -> bool:
    pattern = re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(template))
    return re.fullmatch(pattern, path) is not None


def test_every_route_of_the_api_has_the_clients_description() -> None:
    operations = set(json.loads(SNAPSHOT.read_text())["operations"])
    routes = operations - BROWSER_ONLY - STREAMS - CHAT_PROTOCOLS
    calls = described()
    missing = sorted(
        route
        for route in routes
        if not any(
            call.method == route.split(" ")[0] and _matches(route.split(" ")[1], call.path)
            for call in calls
        )
    )
    assert missing == []
    assert len(calls) == len(routes)  # one description each, none left over
