"""A dispatch's priority over HTTP: in the body, shown on the submission, a bad one a 422
envelope with nothing admitted."""

from collections.abc import Callable
from typing import Any

import pytest

from tether.store import Store

from ..engine.agents import echo_agent

Serve = Callable[..., Any]


async def test_a_priority_in_the_body_is_the_submissions(asgi: Serve) -> None:
    server = await asgi({"a": echo_agent(priority=2)})
    given = await server.client.post(
        "/agents/a/me", params={"wait": True}, json={"body": "go", "priority": -7}
    )
    assert given.status_code == 200, given.text
    default = await server.client.post("/agents/a/you", params={"wait": True}, json={"body": "go"})
    for answer, priority in ((given, -7), (default, 2)):
        view = await server.client.get(f"/submissions/{answer.json()['submissionId']}")
        assert view.json()["priority"] == priority
        assert "priority" not in view.json()["input"]  # the submission's, not the message's


@pytest.mark.parametrize("priority", [1001, -1001, 1.5, "3", True, {"level": 3}, [1]])
async def test_a_bad_priority_is_a_422_envelope(asgi: Serve, store: Store, priority: Any) -> None:
    server = await asgi({"a": echo_agent()})
    refused = await server.client.post("/agents/a/me", json={"body": "go", "priority": priority})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_request" and error["message"]
    assert await store.list_submissions() == []
