"""Every error has a deliberate status; nothing answers a plain-text 500 (issue 18, item 3)."""

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from tether import errors
from tether.demo import demo_agents
from tether.engine import Runtime
from tether.http import create_app
from tether.http._errors import _STATUS, status_of

from .conftest import IN_PROCESS_URL, Server, until_appended

Serve = Callable[..., Any]


def _subclasses(cls: type[Exception]) -> Iterator[type[Exception]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_tether_error_class_has_its_own_status() -> None:
    classes: list[type[Exception]] = [errors.TetherError, *_subclasses(errors.TetherError)]
    defined = {cls for cls in classes if cls.__module__ == "tether.errors"}
    assert defined == {vars(errors)[name] for name in errors.__all__}
    unmapped = sorted(cls.__name__ for cls in defined if cls not in _STATUS)
    assert not unmapped, f"give these a status in tether/http/_errors.py: {unmapped}"
    assert all(400 <= status <= 599 for status in _STATUS.values())
    assert _STATUS[errors.ApprovalConflict] == 409
    assert _STATUS[errors.ClaimLost] == 409 and _STATUS[errors.Fenced] == 409


def test_an_applications_own_subclass_answers_like_its_base() -> None:
    class RateLimited(errors.TransientError):
        pass

    assert status_of(RateLimited("slow down")) == 503


class _LogCount(logging.Handler):
    """Counts records with a traceback, from both Tether's and uvicorn's loggers.

    In process (``asgi``) a route's failure is logged before its answer is handed over, and
    an exception the app let out would be raised at the client's call (where a server would
    log it a second time): the count is final once the answer is in.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tracebacks: list[logging.LogRecord] = []
        self.traceback_logged = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.tracebacks.append(record)
            self.traceback_logged.set()  # the server logs on this loop, in its own task

    def attach(self) -> None:
        for name in _LOGGERS:
            logging.getLogger(name).addHandler(self)


_LOGGERS = ("tether", "uvicorn")  # uvicorn.error propagates to uvicorn


@pytest.fixture
def logged() -> Iterator[_LogCount]:
    """Attach with ``logged.attach()`` once the server runs (uvicorn resets its loggers)."""
    handler = _LogCount()
    yield handler
    for name in _LOGGERS:
        logging.getLogger(name).removeHandler(handler)


class _Exploding:
    """A middleware (outside every handler) that fails on one path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/explode":
            raise RuntimeError("secret internals at /srv/tether")
        await self.app(scope, receive, send)


def _explode_outside_the_guard(app: FastAPI) -> None:
    app.add_middleware(_Exploding)  # added last: outermost, outside the Guard


async def test_an_unexpected_exception_in_a_route_is_a_json_500_logged_once(
    asgi: Serve, logged: _LogCount, monkeypatch: pytest.MonkeyPatch
) -> None:
    server: Server = await asgi(demo_agents())
    logged.attach()

    async def broken(submission_id: str) -> Any:
        raise RuntimeError("secret internals at /srv/tether")

    monkeypatch.setattr(server.runtime, "submission", broken)
    response = await server.client.get("/submissions/abc")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["type"] == "internal"
    assert "secret" not in response.text and "Traceback" not in response.text
    assert len(logged.tracebacks) == 1
    assert "secret internals" in str(logged.tracebacks[0].exc_info[1])  # type: ignore[index]


async def test_an_exception_in_middleware_is_a_json_500_too(
    serve: Serve, logged: _LogCount
) -> None:
    """On uvicorn: Starlette answers this one and re-raises it, and the server logs it."""
    server: Server = await serve(demo_agents(), customize=_explode_outside_the_guard)
    logged.attach()
    response = await server.client.get("/explode")
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "internal"
    assert "secret" not in response.text
    async with asyncio.timeout(30):
        await logged.traceback_logged.wait()
    await asyncio.sleep(0.2)  # the point: no second traceback follows (none to await)
    assert len(logged.tracebacks) == 1
    assert (await server.client.get("/healthz")).status_code == 200


async def test_a_server_side_tether_error_is_logged_and_keeps_its_type(
    asgi: Serve, logged: _LogCount, monkeypatch: pytest.MonkeyPatch
) -> None:
    server: Server = await asgi(demo_agents())
    logged.attach()

    async def diverged(submission_id: str) -> Any:
        raise errors.ReplayDiverged("the log disagrees")

    monkeypatch.setattr(server.runtime, "submission", diverged)
    response = await server.client.get("/submissions/abc")
    assert response.status_code == 500 and response.json()["error"]["type"] == "replay_diverged"
    assert len(logged.tracebacks) == 1


async def _pending_approval(server: Server) -> tuple[str, str]:
    c = server.client
    body = (await c.post("/agents/assistant/me", json={"body": "email bob@example.com: hi"})).json()

    async def pending() -> list[dict[str, Any]]:
        return list((await c.get("/approvals", params={"status": "pending"})).json()["approvals"])

    items = await until_appended(server, body["conversationId"], pending)
    return items[0]["approvalId"], body["submissionId"]


async def test_five_concurrent_identical_approvals_get_the_same_receipt(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    approval_id, submission_id = await _pending_approval(server)
    decision = {"decision": "approve", "approver": "ann", "reason": "fine"}
    answers = await asyncio.gather(
        *(server.client.post(f"/approvals/{approval_id}", json=decision) for _ in range(5))
    )
    assert [a.status_code for a in answers] == [200] * 5, [a.text for a in answers]
    assert all(a.json() == answers[0].json() for a in answers)
    different = await server.client.post(
        f"/approvals/{approval_id}", json={"decision": "reject", "approver": "ann"}
    )
    assert different.status_code == 409
    assert different.json()["error"]["type"] == "approval_conflict"
    settled = await server.client.get(f"/submissions/{submission_id}", params={"wait": True})
    assert settled.json()["settlement"]["result"].startswith("Email sent")


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/agents/assistant/me", "DELETE, GET, HEAD, POST"),
        ("OPTIONS", "/agents/assistant/me", "DELETE, GET, HEAD, POST"),
        ("PATCH", "/schedules", "GET, HEAD, POST"),
        ("OPTIONS", "/schedules/s-1", "DELETE"),
        ("GET", "/approvals/a-1", "POST"),
        ("OPTIONS", "/approvals", "GET, HEAD"),
        ("DELETE", "/ui/logout", "POST"),
    ],
)
async def test_a_method_not_allowed_lists_every_method_its_path_takes(
    method: str, path: str, allowed: str
) -> None:
    """``Allow`` names every method of every route on the path (RFC 9110 §15.5.6), not the
    first route's: ``/agents/{agent}/{instance}`` is three routes."""
    app = create_app(Runtime(demo_agents(), "memory://"))  # answered before any route runs
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=IN_PROCESS_URL) as c:
        answer = await c.request(method, path, headers={"content-type": "application/json"})
    assert answer.status_code == 405, answer.text
    assert answer.json()["error"]["type"] == "method_not_allowed"
    assert answer.headers["allow"] == allowed
