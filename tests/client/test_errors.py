"""Error answers raised as the class the server raised: its code read back to the same
:mod:`tether.errors` class, its message as the server wrote it, the attributes it can carry
from ``details``; the HTTP layer's own refusals as :class:`RequestFailed`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import orjson
import pytest

from tether import errors
from tether.client import RequestFailed, error_from_response
from tether.demo import demo_agents
from tether.http import DispatchBody

from .conftest import Served

Start = Callable[..., Awaitable[Served]]


def envelope(type_: str, message: str, details: object = None) -> bytes:
    body: dict[str, object] = {"type": type_, "message": message}
    if details is not None:
        body["details"] = details
    return orjson.dumps({"error": body})


def every_error_class() -> list[type[errors.TetherError]]:
    found = [getattr(errors, name) for name in errors.__all__]
    return [
        kind for kind in found if isinstance(kind, type) and issubclass(kind, errors.TetherError)
    ]


@pytest.mark.parametrize("kind", every_error_class(), ids=lambda kind: kind.__name__)
def test_every_code_reads_back_to_its_own_class(kind: type[errors.TetherError]) -> None:
    error = error_from_response(409, envelope(kind.code, "it went wrong"))
    assert type(error) is kind
    assert str(error) == "it went wrong"
    assert getattr(error, "http_status") == 409  # noqa: B009


def test_details_become_the_attributes_they_name() -> None:
    forbidden = error_from_response(403, envelope("forbidden", "no", {"scope": "sessions:write"}))
    assert isinstance(forbidden, errors.Forbidden)
    assert (forbidden.scope, forbidden.action, forbidden.resource) == ("sessions:write", None, None)
    invalid = error_from_response(422, envelope("invalid_dispatch", "body: bad", {"field": "body"}))
    assert isinstance(invalid, errors.InvalidDispatch) and invalid.field == "body"


def test_what_is_not_an_envelope_is_a_request_failed() -> None:
    error = error_from_response(502, b"<html>bad gateway</html>")
    assert isinstance(error, RequestFailed)
    assert (error.status, error.type) == (502, "not_json")
    assert str(error) == "<html>bad gateway</html>"
    other = error_from_response(500, b'{"detail": "x"}')
    assert isinstance(other, RequestFailed) and other.type == "not_an_envelope"


async def test_a_404_raises_the_servers_class(served: Start) -> None:
    client = (await served(demo_agents())).client
    with pytest.raises(errors.UnknownAgent, match="no agent named 'nobody'") as raised:
        await client.send("nobody", "ann", "hello")
    assert getattr(raised.value, "http_status") == 404  # noqa: B009
    with pytest.raises(errors.ConversationNotFound):
        await client.records("assistant", "never")
    with pytest.raises(errors.SubmissionNotFound):
        await client.submission("nope")
    with pytest.raises(errors.ApprovalNotFound):
        await client.decide("nope", "approve")
    with pytest.raises(errors.InputNotFound):
        await client.answer("nope", 1)
    with pytest.raises(RequestFailed) as schedule:  # the HTTP layer's own: no class
        await client.delete_schedule("nope")
    assert (schedule.value.status, schedule.value.type) == (404, "schedule_not_found")


async def test_refusals_of_the_input_raise_typed_errors(served: Start) -> None:
    client = (await served(demo_agents())).client
    with pytest.raises(errors.NoRunInFlight):
        await client.steer("assistant", "ann", "faster")
    with pytest.raises(errors.InvalidDispatch):
        await client.dispatch("assistant", "ann", DispatchBody(kind="signal", body="x"))
    with pytest.raises(RequestFailed) as invalid:
        await client.records("assistant", "ann", limit=0)
    assert (invalid.value.status, invalid.value.type) == (422, "invalid_request")
    assert invalid.value.details[0]["field"] == "query.limit"
    with pytest.raises(RequestFailed) as bad_id:
        await client.send("assistant", "ann", "hello")
        async for _ in client.stream("assistant", "ann", follow=False, last_event_id="x:y:z"):
            pass
    assert (bad_id.value.status, bad_id.value.type) == (400, "invalid_last_event_id")
