"""The client side of the CLI: talking to a ``tether serve`` over HTTP, failing in one line."""

from __future__ import annotations

import contextlib
import json
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from tether.cli._exit import ExitCode, fail, one_line, stderr
from tether.client import DEFAULT_URL, WAIT_SLICE

if TYPE_CHECKING:
    import httpx  # imported when a command talks to a server, not for --help

    from tether.cli._render import SessionRenderer

__all__ = (
    "DEFAULT_URL",
    "TOKEN",
    "WAIT_SLICE",
    "Outcome",
    "answer_command",
    "approve_command",
    "check",
    "connect",
    "describe_decision",
    "describe_gate",
    "describe_input",
    "pending_gate",
    "pending_input",
    "render_stream",
    "verified",
    "wait_for_settlement",
)

PROMPT_WIDTH = 120
"""How much of an input's prompt one line shows."""

TOKEN = typer.Option(
    None,
    "--auth-token",
    envvar="TETHER_AUTH_TOKEN",
    help="Your bearer token: the server's shared token, an API token, or a JWT.",
)
"""Every client command's credential option."""


@contextlib.contextmanager
def connect(url: str, token: str | None, timeout: float | None = 30.0) -> Iterator[httpx.Client]:
    """A client of the server at ``url``; a server that cannot be reached (or is lost midway)
    ends the command with one line and :attr:`ExitCode.SERVER_UNREACHABLE`."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=timeout) as client:
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


def render_stream(
    client: httpx.Client, path: str, params: dict[str, Any], renderer: SessionRenderer
) -> None:
    """Render the session stream at ``path`` until it ends. A followed stream that drops (the
    server restarted) is reopened after the last event shown (``Last-Event-ID``: the
    session's records and its subagents' alike), every second until the server is back:
    nothing is shown twice, and only progress sent meanwhile is missed."""
    import httpx

    from tether.cli._render import frames

    opened = False
    while True:
        last = renderer.last_event_id
        resume = {"Last-Event-ID": last} if last is not None else {}
        try:
            with client.stream("GET", path, params=params, headers=resume) as response:
                if response.is_error:
                    response.read()
                    check(response)
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


def check(response: httpx.Response) -> Any:
    """The JSON body of a successful answer; an error answer ends the command with one line
    (``error: 404 unknown_agent: ...``: the error :mod:`tether.client` reads from the
    envelope) and :attr:`ExitCode.FAILED`."""
    if response.is_error:
        # Read as tether.client reads it: the error the server raised, or what the HTTP layer
        # refused (RequestFailed); light, without the client's wire models.
        from tether.client import RequestFailed, error_from_response

        error = error_from_response(response.status_code, response.content)
        kind = error.type if isinstance(error, RequestFailed) else error.code
        hint = " (give --auth-token or TETHER_AUTH_TOKEN)" if response.status_code == 401 else ""
        fail(f"{response.status_code} {kind}: {one_line(error)}{hint}")
    try:
        return response.json() if response.content else {}
    except ValueError:
        fail(f"{response.status_code} not_json: {one_line(response.text[:200])}")


@dataclass(frozen=True)
class Outcome:
    """Where a dispatch stands: settled (``settlement``), or held by ``gate``, a pending
    approval, or by ``input``, a pending input (``GET /inputs``), of its own or of a run
    ahead of it in the session."""

    submission_id: str
    settlement: dict[str, Any] | None = None
    gate: dict[str, Any] | None = None
    input: dict[str, Any] | None = None

    @property
    def queued_behind(self) -> bool:
        held = self.gate if self.gate is not None else self.input
        return held is not None and held.get("submissionId") != self.submission_id


def list_page(
    url: str,
    token: str | None,
    path: str,
    field: str,
    *,
    status: str,
    limit: int,
    **filters: str | None,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of a listing (``GET /approvals``, ``/inputs``): its items and next cursor."""
    params: dict[str, str | int] = {"status": status, "limit": limit}
    params |= {name: value for name, value in filters.items() if value is not None}
    with connect(url, token) as client:
        page = check(client.get(path, params=params))
    return list(page[field]), page.get("nextCursor")


def wait_for_settlement(
    client: httpx.Client, agent: str, instance: str, session: str, answer: httpx.Response
) -> Outcome:
    """Follow a dispatch answered ``answer`` until it settles or waits for a human (an
    approval or an input). A ``?wait`` holds each request a second at most, so a park is
    noticed that fast."""
    body = check(answer)
    submission_id = body["submissionId"]
    if answer.status_code == 200:
        return Outcome(submission_id, settlement=body)
    status = body.get("status")
    while True:
        if status in ("waiting", "queued"):
            if gate := pending_gate(client, agent, instance, session):
                return Outcome(submission_id, gate=gate)
            if asked := pending_input(client, agent, instance, session):
                return Outcome(submission_id, input=asked)
        view = check(
            client.get(
                f"/submissions/{submission_id}", params={"wait": True, "timeout": WAIT_SLICE}
            )
        )
        status = view["status"]
        if status == "settled":
            return Outcome(submission_id, settlement=view["settlement"])


def pending_gate(
    client: httpx.Client, agent: str, instance: str, session: str
) -> dict[str, Any] | None:
    """The approval a session waits for, if any (paging through the instance's pending ones)."""
    return _first_pending(client, "/approvals", "approvals", agent, instance, session)


def pending_input(
    client: httpx.Client, agent: str, instance: str, session: str
) -> dict[str, Any] | None:
    """The input a session waits for, if any (paging through the instance's pending ones)."""
    return _first_pending(client, "/inputs", "inputs", agent, instance, session)


def _first_pending(
    client: httpx.Client, path: str, name: str, agent: str, instance: str, session: str
) -> dict[str, Any] | None:
    params: dict[str, str | int] = {
        "agent": agent,
        "instance": instance,
        "status": "pending",
        "limit": 1000,
    }
    while True:
        listing = check(client.get(path, params=params))
        found = [item for item in listing[name] if item["session"] == session]
        if found or not listing.get("nextCursor"):
            return found[0] if found else None
        params["cursor"] = listing["nextCursor"]


def approve_command(gate: dict[str, Any], url: str) -> str:
    """The command that decides ``gate`` (with ``--url`` when it is not the default)."""
    words = ["tether", "approve", gate["approvalId"]]
    if url != DEFAULT_URL:
        words += ["--url", url]
    return shlex.join(words)


def answer_command(item: dict[str, Any], url: str) -> str:
    """The command that answers input ``item``, VALUE left for the person to give (with
    ``--url`` when it is not the default)."""
    words = ["tether", "answer", item["inputId"]]
    command = shlex.join(words) + " VALUE"
    if url != DEFAULT_URL:
        command += " " + shlex.join(["--url", url])
    return command


def describe_input(item: dict[str, Any]) -> str:
    """An input's prompt on one line (cut at :data:`PROMPT_WIDTH`), quoted, and the schema
    its answer must fit, if it has one."""
    prompt = one_line(item.get("prompt", ""))
    if len(prompt) > PROMPT_WIDTH:
        prompt = prompt[: PROMPT_WIDTH - 1] + "…"
    schema = item.get("schema")
    fits = f" (answer: {json.dumps(schema)})" if schema is not None else ""
    return f"{json.dumps(prompt, ensure_ascii=False)}{fits}"


def describe_gate(gate: dict[str, Any]) -> str:
    return f"{gate['tool']}({json.dumps(gate.get('args', {}))})"


def verified(item: dict[str, Any]) -> str:
    """`` (ann@acme, acme)``: who decided or answered as the server verified them (their
    subject, and tenant if any), after the name they are shown under; nothing when no one
    authenticated did."""
    by = item.get("decidedBy")
    if not isinstance(by, dict) or not by.get("subject"):
        return ""
    tenant = f", {by['tenant']}" if by.get("tenant") else ""
    return f" ({by['subject']}{tenant})"


def describe_decision(gate: dict[str, Any]) -> str:
    """``  -> approve by Ann (ann@acme, acme) at <time>: <reason>`` for a decided gate (the
    verified subject and tenant when the server knew them), ``  closed at <time>`` for a
    closed one, nothing for a pending one."""
    decided = gate.get("decision")
    if not decided:
        return f"  closed at {gate['closedAt']}" if gate.get("closedAt") else ""
    edited = f" {json.dumps(decided['args'])}" if decided.get("args") is not None else ""
    reason = f": {decided['reason']}" if decided.get("reason") else ""
    when = f" at {gate['decidedAt']}" if gate.get("decidedAt") else ""
    who = f"{decided['approver']}{verified(gate)}"
    return f"  -> {decided['decision']}{edited} by {who}{when}{reason}"
