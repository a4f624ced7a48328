"""The ``tether`` command."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import typer
from rich.console import Console

from tether.cli._serve import load_agents, serve, worker
from tether.errors import LogTampered, TetherError
from tether.journal import Journal
from tether.records import Record
from tether.store import DEFAULT_STORE_URL, Store, open_store
from tether.stream import CloseSpan, OpenSpan, SpanDeriver, StreamProjector

__all__ = ("app", "main")

app = typer.Typer(
    help="Tether: durable AI-agent sessions.", no_args_is_help=True, add_completion=False
)
app.command()(serve)
app.command()(worker)
console = Console(soft_wrap=True)  # ids and JSON must survive copy-paste and pipes
URL = typer.Option("http://127.0.0.1:8484", "--url", envvar="TETHER_URL", help="The server.")
TOKEN = typer.Option(None, "--auth-token", envvar="TETHER_AUTH_TOKEN")
STORE = typer.Option(DEFAULT_STORE_URL, "--store", help="Store URL.")


def _client(url: str, token: str | None, timeout: float | None = 30.0) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, headers=headers, timeout=timeout)


def _check(response: httpx.Response) -> Any:
    body = response.json() if response.content else {}
    if response.is_error:
        error = body.get("error", {}) if isinstance(body, dict) else {}
        kind, message = error.get("type", "error"), error.get("message", body)
        console.print(f"[red]{response.status_code} {kind}[/red]: {message}")
        raise typer.Exit(1)
    return body


@app.command()
def send(
    agent: str,
    instance: str,
    text: str,
    session: str = typer.Option("default", "--session"),
    wait: bool = typer.Option(False, "--wait", help="Wait for the answer and print it."),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Send a message; with --wait, print the answer."""
    with _client(url, auth_token, timeout=None if wait else 30.0) as client:
        body = _check(
            client.post(
                f"/agents/{agent}/{instance}",
                params={"wait": wait},
                json={"body": text, "session": session},
            )
        )
    if wait:
        result = body.get("result")
        console.print(result if isinstance(result, str) else json.dumps(body, indent=2))
        if body.get("status") != "succeeded":
            raise typer.Exit(1)
    else:
        console.print_json(data=body)


@app.command()
def tail(
    agent: str,
    instance: str,
    session: str = typer.Option("default", "--session"),
    follow: bool = typer.Option(
        False, "--follow", help="Keep following when the session goes idle."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Render a session's stream: text live, tool calls, approvals, settlements."""
    params: dict[str, str | bool] = {"session": session, "follow": follow}
    with (
        _client(url, auth_token, timeout=None) as client,
        client.stream("GET", f"/agents/{agent}/{instance}", params=params) as response,
    ):
        if response.is_error:
            response.read()
            _check(response)
        for line in response.iter_lines():
            if line.startswith("data: "):
                _render(orjson.loads(line[6:]))


_PAST = {"approve": "approved", "reject": "rejected"}


def _render(record: dict[str, Any]) -> None:
    kind, payload = record["kind"], record.get("payload", {})
    if kind == "user_message":
        console.print(f"\n[bold]user[/bold]: {payload.get('body', '')}")
    elif kind == "assistant_text_delta":
        console.print(payload.get("text", ""), end="")
    elif kind == "assistant_message_completed" and not payload.get("interrupted"):
        console.print()
    elif kind == "tool_called":
        console.print(f"[cyan]→ {payload['tool']}({json.dumps(payload.get('args', {}))})[/cyan]")
    elif kind == "tool_outcome":
        console.print(f"[cyan]← {payload.get('status', 'ok')}: {payload.get('content', '')}[/cyan]")
    elif kind == "approval_requested":
        console.print(
            f"[yellow]⏸ approval {payload['approvalId']} needed for {payload['tool']}[/yellow]"
        )
    elif kind == "approval_decided":
        decided = _PAST.get(payload["decision"], payload["decision"])
        console.print(f"[yellow]✓ {decided} by {payload['approver']}[/yellow]")
    elif kind == "steer_received":
        console.print(f"[magenta]steer[/magenta]: {payload.get('body', '')}")
    elif kind == "submission_settled":
        console.print(
            f"[green]settled {payload.get('status')}[/green] {payload.get('error', '')}".rstrip()
        )


@app.command()
def approvals(url: str = URL, auth_token: str | None = TOKEN) -> None:
    """List approvals waiting for a decision."""
    with _client(url, auth_token) as client:
        items = _check(client.get("/approvals"))["approvals"]
    if not items:
        console.print("no approvals waiting")
    for item in items:
        console.print(
            f"{item['approvalId']}  {item['status']:8}  "
            f"{item['agent']}/{item['instance']}/{item['session']}  "
            f"{item['tool']}({json.dumps(item['args'])})"
        )


@app.command()
def approve(
    approval_id: str,
    decision: str = typer.Option("approve", "--decision", help="approve | reject"),
    reason: str | None = typer.Option(None, "--reason"),
    approver: str = typer.Option("cli", "--approver"),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Decide a waiting approval."""
    with _client(url, auth_token) as client:
        _check(
            client.post(
                f"/approvals/{approval_id}",
                json={"decision": decision, "reason": reason, "approver": approver},
            )
        )
    console.print(f"{_PAST.get(decision, decision)} {approval_id}")


def _run(coroutine: Any) -> Any:
    try:
        return asyncio.run(coroutine)
    except TetherError as exc:
        console.print(f"[red]{exc.code}[/red]: {exc}")
        raise typer.Exit(1) from None


async def _each_record(store: Store, conversation: str) -> AsyncIterator[Record]:
    after = 0
    while page := await store.read(conversation, after_seq=after, limit=1000):
        for record in page:
            yield record
        after = page[-1].seq


@app.command()
def records(conversation: str, store: str = STORE) -> None:
    """Print a conversation's records, one JSON object a line."""

    async def run() -> None:
        async with await open_store(store) as opened:
            async for record in _each_record(opened, conversation):
                typer.echo(record.to_json().decode())

    _run(run())


@app.command()
def spans(conversation: str, store: str = STORE) -> None:
    """Re-derive a conversation's span signals (tools, reasoning) from its log, one JSON
    object a line; spans still open at the end are closed as incomplete."""

    async def run() -> None:
        projector, deriver = StreamProjector(), SpanDeriver()
        async with await open_store(store) as opened:
            async for record in _each_record(opened, conversation):
                for event in projector.feed(record):
                    for signal in deriver.observe(event):
                        _print_signal(record.seq, signal)
        for signal in deriver.flush():
            _print_signal(None, signal)

    _run(run())


def _print_signal(seq: int | None, signal: OpenSpan | CloseSpan) -> None:
    kind = "open" if isinstance(signal, OpenSpan) else "close"
    line = {"signal": kind, "seq": seq, **dataclasses.asdict(signal)}
    typer.echo(orjson.dumps(line).decode())


@app.command()
def verify(conversation: str, store: str = STORE) -> None:
    """Re-derive a conversation's hash chain: exit 0 if intact, 1 naming the first bad seq."""

    async def run() -> int:
        async with await open_store(store) as opened:
            return await opened.verify(conversation)

    try:
        count = asyncio.run(run())
    except LogTampered as exc:
        console.print(f"[red]broken at seq {exc.seq}[/red]: {exc.reason}")
        raise typer.Exit(1) from None
    except TetherError as exc:
        console.print(f"[red]{exc.code}[/red]: {exc}")
        raise typer.Exit(1) from None
    console.print(f"ok: {count} records verified")


@app.command()
def replay(
    conversation: str,
    store: str = STORE,
    app_: str | None = typer.Option(None, "--app", help="module:factory of the agents."),
    demo: bool = typer.Option(False, "--demo"),
) -> None:
    """Re-run a conversation from its log: zero model and tool calls; exit 1 on divergence."""
    agents = load_agents(app_, demo)

    async def run() -> list[Any]:
        async with await open_store(store) as opened:
            found = await opened.get_conversation(conversation)
            definition = agents.get(found.key.agent)
            if definition is None:
                raise typer.BadParameter(f"agent {found.key.agent!r} is not in the given agents")
            spec = definition.initialize(found.key.instance, {})
            if inspect.isawaitable(spec):
                spec = await spec
            journal = await Journal.open(
                opened, conversation, fence=0
            )  # no model, no tools: replay only
            return await journal.replay(spec.harness)

    outputs = _run(run())
    for output in outputs:
        console.print(output if isinstance(output, str) else json.dumps(output))
    console.print(f"replayed {len(outputs)} executions; model and tool invocations: 0")


@app.command()
def fork(
    conversation: str,
    at: int = typer.Option(..., "--at", help="Keep records 1..AT."),
    store: str = STORE,
) -> None:
    """Fork a conversation into a new session sharing its first AT records."""

    async def run() -> str:
        from tether.engine import Runtime

        async with await open_store(store) as opened:
            runtime = Runtime({}, opened)
            await runtime.start(worker=False)
            try:
                child = await runtime.fork(conversation, at_seq=at)
            finally:
                await runtime.close()
            return f"{child.id} ({child.key})"

    console.print(f"forked: {_run(run())}")


def main() -> None:
    app()
