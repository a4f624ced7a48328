"""A dispatch's budget over HTTP: camelCase in the body, a bad one a 422 envelope."""

from collections.abc import Callable
from typing import Any

import pytest

from ..engine.test_budget import define, looping

Serve = Callable[..., Any]


async def test_a_budget_in_the_body_limits_the_run(asgi: Serve) -> None:
    server = await asgi({"a": define(looping())})
    settled = await server.client.post(
        "/agents/a/me",
        params={"wait": True},
        json={"body": "go", "budget": {"modelCalls": 2, "tokens": 20000, "costUsd": 0.5}},
    )
    assert settled.status_code == 200
    body = settled.json()
    assert body["status"] == "failed" and body["errorCode"] == "budget_exhausted"
    assert body["result"] == "step 2"


@pytest.mark.parametrize(
    "budget",
    [{"modelCalls": -1}, {"tokens": "lots"}, {"costUsd": -0.5}, {"toolCalls": 1.5}, {"x": 1}],
)
async def test_a_bad_budget_is_a_422_envelope(asgi: Serve, budget: dict[str, Any]) -> None:
    server = await asgi({"a": define(looping())})
    refused = await server.client.post("/agents/a/me", json={"body": "go", "budget": budget})
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["type"] == "invalid_request" and error["message"]
