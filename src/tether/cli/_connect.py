"""The client commands' way to a server: a :class:`tether.client.TetherClient`, and each way
talking to one fails (no server there, an error answer, a body the wire refuses) as one line
and an exit code (``cli/_exit.py``).

Nothing here loads httpx, the wire models or the client until a command talks to a server:
``tether --help`` stays cheap.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import typer

from tether.cli._exit import ExitCode, fail, one_line, stderr
from tether.client import DEFAULT_URL, WAIT_SLICE

if TYPE_CHECKING:
    import httpx
    from pydantic import BaseModel, ValidationError

    from tether.cli._render import SessionRenderer
    from tether.client import TetherClient

__all__ = (
    "DEFAULT_URL",
    "TOKEN",
    "WAIT_SLICE",
    "connect",
    "new_client",
    "refused",
    "render_stream",
    "request_body",
)

M = TypeVar("M", bound="BaseModel")

TOKEN = typer.Option(
    None,
    "--auth-token",
    envvar="TETHER_AUTH_TOKEN",
    help="Your bearer token: the server's shared token, an API token, or a JWT.",
)
"""Every client command's credential option."""


def new_client(url: str, token: str | None, timeout: float | None) -> TetherClient:
    """The client a command talks to the server at ``url`` with (the one place one is made:
    a test gives it a transport of its own)."""
    from tether.client import TetherClient

    return TetherClient(url, token=token, timeout=timeout)


@contextlib.contextmanager
def connect(url: str, token: str | None, timeout: float | None = 30.0) -> Iterator[TetherClient]:
    """A client of the server at ``url``. A server that cannot be reached (or is lost midway)
    ends the command with one line and :attr:`ExitCode.SERVER_UNREACHABLE`; an error answer
    with ``error: 404 unknown_agent: ...`` (the error :mod:`tether.client` raised) and
    :attr:`ExitCode.FAILED`."""
    import httpx
    from pydantic import ValidationError

    from tether.errors import TetherError

    try:
        with new_client(url, token, timeout) as client:
            yield client
    except httpx.ConnectError as exc:
        fail(
            f"cannot reach the server at {url} ({_reason(exc)}): is `tether serve` running? "
            "(--url or TETHER_URL names another)",
            ExitCode.SERVER_UNREACHABLE,
        )
    except httpx.TimeoutException:
        fail(f"the server at {url} did not answer in time", ExitCode.SERVER_UNREACHABLE)
    except httpx.TransportError as exc:
        fail(f"lost the server at {url}: {_reason(exc)}", ExitCode.SERVER_UNREACHABLE)
    except TetherError as error:
        fail(refused(error))
    except ValidationError as exc:
        if _a_request_body(exc.title):  # made from the command's arguments: nothing was sent
            fail(f"invalid_request: {_problems(exc)}")
        fail(f"not a Tether answer from {url}: {_problems(exc)}")


def refused(error: BaseException) -> str:
    """An error answer as one line: ``404 unknown_agent: <message>`` (the HTTP layer's own
    refusals, :class:`~tether.client.RequestFailed`, by their ``type``), with a hint for a
    401."""
    from tether.client import RequestFailed
    from tether.errors import TetherError

    status: int | None
    if isinstance(error, RequestFailed):
        status, kind = error.status, error.type
    elif isinstance(error, TetherError):
        status, kind = getattr(error, "http_status", None), error.code
    else:
        return one_line(error)
    hint = " (give --auth-token or TETHER_AUTH_TOKEN)" if status == 401 else ""
    prefix = f"{status} {kind}" if status is not None else kind
    return f"{prefix}: {one_line(error)}{hint}"


def request_body(kind: type[M], fields: Mapping[str, Any]) -> M:
    """``fields`` (the wire's names) as the request body ``kind``: a value the wire refuses
    ends the command as the server's refusal would, ``error: invalid_request: <field>:
    <problem>`` and :attr:`ExitCode.FAILED`, before anything is sent."""
    from pydantic import ValidationError

    try:
        return kind.model_validate(dict(fields))
    except ValidationError as exc:
        fail(f"invalid_request: {_problems(exc)}")


def _a_request_body(title: str) -> bool:
    import tether.wire

    kind = getattr(tether.wire, title, None)
    return isinstance(kind, type) and issubclass(kind, tether.wire.RequestBody)


def _problems(exc: ValidationError) -> str:
    return one_line(
        "; ".join(
            f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
            for problem in exc.errors(include_url=False)
        )
    )


def render_stream(
    client: TetherClient,
    agent: str,
    instance: str,
    params: dict[str, Any],
    renderer: SessionRenderer,
) -> None:
    """Render the session's stream until it ends, every frame (progress and the subagents'
    too: the typed :meth:`TetherClient.stream` keeps to the session's own events). A
    followed stream that drops (the server restarted) is reopened after the last event
    shown (``Last-Event-ID``: the session's records and its subagents' alike), every second
    until the server is back: nothing is shown twice, and only progress sent meanwhile is
    missed."""
    import httpx

    from tether.cli._render import frames
    from tether.client import error_from_response

    opened = False
    while True:
        last = renderer.last_event_id
        resume = {"Last-Event-ID": last} if last is not None else {}
        try:
            session = f"/agents/{quote(agent, safe='')}/{quote(instance, safe='')}"
            with client.http.stream("GET", session, params=params, headers=resume) as response:
                if response.is_error:
                    response.read()
                    raise error_from_response(response.status_code, response.content)
                if opened:
                    stderr.print("[dim](reconnected)[/dim]")
                opened = True
                for frame in frames(response.iter_lines()):
                    renderer.feed(frame)
            if not params.get("follow"):
                return
        except httpx.TransportError:
            if not (opened and params.get("follow")):
                raise
        renderer.end_line()
        stderr.print("[dim](connection lost; reconnecting)[/dim]")
        time.sleep(1.0)


def _reason(exc: httpx.TransportError) -> str:
    text = str(exc)
    return text.split("] ", 1)[-1].lower() if text else type(exc).__name__  # "[Errno 111] X"
