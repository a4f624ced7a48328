"""Subagents on the wire (issue 21, items 5 and 7): a submission's parent, depth and
children, an operator's abort, and the subagent tree with statuses and usage."""

from collections.abc import Callable
from typing import Any

import pytest

from tether.engine import CANCELLED_BY_PARENT

from .conftest import Server
from .delegation import WAIT, Gate, team
from .test_openapi import Checked, _document

Serve = Callable[..., Any]
ME = "/agents/assistant/me"
JSON = {"content-type": "application/json"}  # every POST says so, a bodiless one too


async def _delegated(server: Server, body: str = "ask around") -> dict[str, Any]:
    answer = await server.client.post(ME, params={"wait": True}, json={"body": body})
    assert answer.status_code == 200, answer.text
    settled: dict[str, Any] = answer.json()
    return settled


async def test_a_submission_shows_its_children_and_a_child_its_parent(asgi: Serve) -> None:
    agents, settings = team("tides", "moons")
    server: Server = await asgi(agents, settings=settings)
    call = Checked(server.client, _document())
    settled = await _delegated(server)
    assert settled["result"] == "Findings: notes on tides | notes on moons"

    parent = (await call("GET", f"/submissions/{settled['submissionId']}")).json()
    assert parent["depth"] == 0 and "parentSubmissionId" not in parent
    children = parent["children"]
    assert [c["callId"] for c in children] == ["call-0", "call-1"]
    assert {c["agent"] for c in children} == {"researcher"}
    assert {c["status"] for c in children} == {"settled"}
    for child in children:
        view = (await call("GET", f"/submissions/{child['submissionId']}")).json()
        assert view["parentSubmissionId"] == settled["submissionId"]
        assert view["parentCallId"] == child["callId"] and view["depth"] == 1
        assert view["conversationId"] == child["conversationId"]
        assert view["children"] == []
        assert child["streamUrl"] == f"/agents/researcher/me?session={view['session']}"


async def test_the_tree_holds_every_node_with_its_status_and_usage(asgi: Serve) -> None:
    agents, settings = team("tides", "moons")
    server: Server = await asgi(agents, settings=settings)
    call = Checked(server.client, _document())
    settled = await _delegated(server)
    tree = (await call("GET", f"/submissions/{settled['submissionId']}/tree")).json()

    runtime = server.runtime
    own = await runtime.usage(settled["conversationId"], submission_id=settled["submissionId"])
    assert tree["submissionId"] == settled["submissionId"] and tree["status"] == "settled"
    assert tree["settlement"]["result"] == settled["result"]
    assert tree["truncated"] is False and tree["depth"] == 0
    assert tree["usage"]["calls"] == own.calls == 4  # two of its own, one each child
    assert tree["usage"]["inputTokens"] == own.input_tokens
    assert tree["usage"]["outputTokens"] == own.output_tokens
    assert [c["parentCallId"] for c in tree["children"]] == ["call-0", "call-1"]
    for node in tree["children"]:
        usage = await runtime.usage(node["conversationId"])
        assert node["usage"] == {
            "calls": 1,
            "inputTokens": usage.input_tokens,
            "outputTokens": usage.output_tokens,
        }
        assert node["status"] == "settled" and node["settlement"]["status"] == "succeeded"
        assert node["depth"] == 1 and node["children"] == [] and node["truncated"] is False
        assert node["parentSubmissionId"] == settled["submissionId"]
        assert node["streamUrl"] == f"/agents/researcher/me?session={node['session']}"
    child_calls = sum(c["usage"]["calls"] for c in tree["children"])
    assert tree["usage"]["calls"] - child_calls == 2


@pytest.mark.parametrize("route", ["", "/tree", "/abort"])
async def test_an_unknown_submission_is_a_typed_404(asgi: Serve, route: str) -> None:
    agents, settings = team("tides")
    server: Server = await asgi(agents, settings=settings)
    call = Checked(server.client, _document())
    method = "POST" if route == "/abort" else "GET"
    response = await call(method, f"/submissions/nope{route}", headers=JSON)
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "submission_not_found"


async def test_aborting_a_child_gives_its_parent_an_error_result(asgi: Serve) -> None:
    gate = Gate()
    agents, settings = team("tides", gate=gate)
    server: Server = await asgi(agents, settings=settings)
    call = Checked(server.client, _document())
    accepted = (await call("POST", ME, json={"body": "ask"})).json()
    await gate.until_entered()
    [child] = (await call("GET", f"/submissions/{accepted['submissionId']}")).json()["children"]
    aborted = await call("POST", f"/submissions/{child['submissionId']}/abort", headers=JSON)
    assert aborted.status_code == 200
    view = aborted.json()
    assert view["submissionId"] == child["submissionId"] and "cancelRequestedAt" in view

    parent = await call(
        "GET",
        f"/submissions/{accepted['submissionId']}",
        params={"wait": True, "timeout": WAIT},
    )
    settlement = parent.json()["settlement"]
    assert settlement["status"] == "succeeded"  # the parent went on with an error result
    assert settlement["result"].startswith("Findings: The researcher task failed")
    ended = (await call("GET", f"/submissions/{child['submissionId']}")).json()
    assert ended["status"] == "settled" and ended["settlement"]["status"] == "aborted"
    tree = (await call("GET", f"/submissions/{accepted['submissionId']}/tree")).json()
    assert tree["children"][0]["settlement"]["status"] == "aborted"

    # A settled submission is answered as it is, however often it is aborted.
    again = await call("POST", f"/submissions/{child['submissionId']}/abort", headers=JSON)
    assert again.status_code == 200 and again.json() == ended
    gate.opened.set()


async def test_aborting_a_parent_cancels_its_children(asgi: Serve) -> None:
    gate = Gate()
    agents, settings = team("tides", "moons", gate=gate)
    server: Server = await asgi(agents, settings=settings)
    call = Checked(server.client, _document())
    accepted = (await call("POST", ME, json={"body": "ask"})).json()
    await gate.until_entered(2)
    parent = (
        await call("POST", f"/submissions/{accepted['submissionId']}/abort", headers=JSON)
    ).json()
    assert "cancelRequestedAt" in parent  # it settles at its next safe point
    settled = await call(
        "GET",
        f"/submissions/{accepted['submissionId']}",
        params={"wait": True, "timeout": WAIT},
    )
    assert settled.json()["settlement"]["status"] == "aborted"
    for child in settled.json()["children"]:
        ended = await call(
            "GET", f"/submissions/{child['submissionId']}", params={"wait": True, "timeout": WAIT}
        )
        assert ended.json()["settlement"]["errorCode"] == CANCELLED_BY_PARENT
    gate.opened.set()
