"""The ``tether`` command.

Only what ``tether --help`` and the client commands need is imported here: the server stack
(uvicorn, FastAPI, the engine, the stores) loads inside the commands that use it.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from tether.cli._backup import backup
from tether.cli._budgets import budgets, extend
from tether.cli._connect import DEFAULT_URL, TOKEN, connect, request_body
from tether.cli._exit import EXIT_CODES_HELP, ExitCode, fail
from tether.cli._export import export, export_key, import_log
from tether.cli._gates import (
    answer_command,
    approve_command,
    describe_decision,
    describe_gate,
    describe_input,
)
from tether.cli._help import HELP_SETTINGS, WholeSummaries
from tether.cli._inputs import answer, inputs
from tether.cli._retention import KEEP_RECORDS, RETAIN_DAYS
from tether.cli._schedules import schedules_app
from tether.cli._serve import CONFIG, DEFAULT_STORE_URL, SETTINGS_EPILOG, serve, worker
from tether.cli._sessions import delete, sessions
from tether.cli._tokens import tokens_app
from tether.cli._usage import usage
from tether.cli._versions import agents, upgrade, versions
from tether.cli._webhooks import webhooks_app

__all__ = ("app", "main")

app = typer.Typer(
    cls=WholeSummaries,
    context_settings=HELP_SETTINGS,
    help="Tether: durable AI-agent sessions.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain help: wraps to the terminal, never truncates an option
    pretty_exceptions_enable=False,
)


def _print_version(asked: bool) -> None:
    """``tether --version``: the installed package's version (``tether.__version__``, which
    reads its metadata: pyproject.toml's ``version`` is the one source), then exit."""
    if asked:
        import tether

        typer.echo(f"tether {tether.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        expose_value=False,
        callback=_print_version,
        help="Print the installed version and exit.",
    ),
) -> None:
    """Tether: durable AI-agent sessions."""


app.command(epilog=SETTINGS_EPILOG)(serve)
app.command(epilog=SETTINGS_EPILOG)(worker)
app.command()(backup)
sessions_app = typer.Typer(
    cls=WholeSummaries,
    help="List sessions (`tether sessions`), or move parked runs to a newer version.",
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
sessions_app.callback(invoke_without_command=True)(sessions)
sessions_app.command()(upgrade)
app.add_typer(sessions_app, name="sessions")
app.command()(agents)
app.command()(versions)
app.command()(delete)
app.command()(inputs)
app.command()(answer)
app.command()(budgets)
app.command()(usage)
app.command()(extend)
app.command()(export)
app.command(name="import")(import_log)
app.command(name="export-key")(export_key)
app.add_typer(schedules_app, name="schedules")
app.add_typer(webhooks_app, name="webhooks")
app.add_typer(tokens_app, name="tokens")
console = Console(
    soft_wrap=True, highlight=False, emoji=False
)  # ids and JSON survive copy-paste and pipes
URL = typer.Option(DEFAULT_URL, "--url", envvar="TETHER_URL", help="The server to talk to.")
STORE = typer.Option(
    DEFAULT_STORE_URL, "--store", help="The store to read (sqlite:///dir, postgresql://...)."
)
SESSION = typer.Option("default", "--session", help="The session of the instance.")


@app.command()
def send(
    agent: str = typer.Argument(help="The agent's name."),
    instance: str = typer.Argument(help="The agent instance (a user, a ticket...)."),
    text: str = typer.Argument(help="The message."),
    session: str = SESSION,
    priority: int | None = typer.Option(
        None,
        "--priority",
        help="An integer, -1000 to 1000: higher is claimed first among other sessions' "
        "queued work, aged so none waits forever (docs/priorities.md); by default the "
        "agent's, else 0.",
    ),
    wait: bool = typer.Option(
        False,
        "--wait",
        help="Wait for the answer and print it; if the run parks for an approval or an "
        "input, say so, print the command that decides or answers it and exit 9.",
    ),
    run_at: str | None = typer.Option(
        None,
        "--run-at",
        help="Run it at this time (RFC 3339 with an offset, e.g. 2030-01-01T09:00:00Z): it "
        "waits `scheduled` until then (docs/timers.md).",
    ),
    after: float | None = typer.Option(
        None, "--after", help="Run it this many seconds from now (as --run-at)."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Send a message; with --wait, print the answer."""
    from tether.wire import DispatchBody

    message: dict[str, str | float] = {"body": text, "session": session}
    if run_at is not None:
        message["runAt"] = run_at
    if after is not None:
        message["afterSeconds"] = after
    if priority is not None:
        message["priority"] = priority
    body = request_body(DispatchBody, message)
    with connect(url, auth_token, timeout=None if wait else 30.0) as client:
        if not wait:
            accepted = client.dispatch(agent, instance, body)
            console.print_json(data=accepted.model_dump(mode="json"))
            return
        try:
            outcome = client.send(agent, instance, body)
        except KeyboardInterrupt:  # the message stays sent: only the waiting stops
            raise typer.Exit(ExitCode.INTERRUPTED) from None
    waiting = "queued behind a run waiting" if outcome.queued_behind else "waiting"
    if (gate := outcome.approval) is not None:
        console.print(f"{waiting} for approval: {describe_gate(gate)}")
        console.print(f"  decide it: {approve_command(gate, url)}")
        console.print("  (or add --decision reject --reason TEXT; `tether tail` follows it)")
        raise typer.Exit(ExitCode.WAITING_FOR_APPROVAL)
    if (asked := outcome.input) is not None:
        console.print(f"{waiting} for input: {escape(describe_input(asked))}")
        console.print(f"  answer it: {escape(answer_command(asked, url))}")
        console.print("  (VALUE is JSON if it parses, else text; `tether tail` follows it)")
        raise typer.Exit(ExitCode.WAITING_FOR_APPROVAL)
    settlement = outcome.settlement
    assert settlement is not None
    result = settlement.result
    if settlement.status == "succeeded":
        console.print(result if isinstance(result, str) else json.dumps(result, indent=2))
        return
    console.print(json.dumps(settlement.model_dump(mode="json"), indent=2))
    fail(f"the run {settlement.status}: {settlement.error or 'no answer'}")


@app.command()
def tail(
    agent: str = typer.Argument(help="The agent's name."),
    instance: str = typer.Argument(help="The agent instance."),
    session: str = SESSION,
    follow: bool = typer.Option(
        False,
        "--follow",
        help="Keep following when the session goes idle (live progress too); Ctrl-C ends.",
    ),
    children: bool = typer.Option(
        True,
        "--children/--no-children",
        help="Show the subagents a task call spawns, indented under the call.",
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Render a session's stream: text live, tool calls, approvals, settlements, and the
    subagent tree (each child under its task call, with how it ended)."""
    from tether.cli._connect import render_stream
    from tether.cli._render import SessionRenderer

    renderer = SessionRenderer(console)
    params: dict[str, str | bool | int] = {
        "session": session,
        "follow": follow,
        "children": children,
    }
    try:
        with connect(url, auth_token, timeout=None) as client:
            render_stream(client, agent, instance, params, renderer)
    except KeyboardInterrupt:
        raise typer.Exit(ExitCode.INTERRUPTED) from None


class GateFilter(enum.StrEnum):
    PENDING = "pending"
    DECIDED = "decided"
    CLOSED = "closed"
    ALL = "all"


GATE_STATUS = typer.Option(
    GateFilter.PENDING,
    "--status",
    help="pending: waiting for a decision; decided: the decisions made (who, what, why, "
    "when); closed: settled before anyone decided; all.",
)


@app.command()
def approvals(
    status: GateFilter = GATE_STATUS,
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's."),
    instance: str | None = typer.Option(None, "--instance", help="Only this instance's."),
    tool: str | None = typer.Option(None, "--tool", help="Only calls of this tool."),
    limit: int = typer.Option(100, "--limit", min=1, max=1000, help="At most this many."),
    cursor: str | None = typer.Option(
        None, "--cursor", help="Where the previous page said the next one starts."
    ),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """List approvals, oldest request first: by default those waiting for a decision."""
    with connect(url, auth_token) as client:
        page = client.approvals(
            status=status.value,
            agent=agent,
            instance=instance,
            tool=tool,
            limit=limit,
            cursor=cursor,
        )
    if not page.approvals:
        console.print("no approvals waiting" if status is GateFilter.PENDING else "no approvals")
    for item in page.approvals:
        console.print(
            f"{item.approval_id}  {item.status:8}  "
            f"{item.agent}/{item.instance}/{item.session}  "
            f"{describe_gate(item)}{escape(describe_decision(item))}"
        )
    if page.next_cursor:
        console.print(f"more: add --cursor {page.next_cursor}")


class Decision(enum.StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    EDIT = "edit"


DECISION = typer.Option(
    Decision.APPROVE, "--decision", help="Approve, reject, or edit the call's arguments."
)
_PAST = {"approve": "approved", "reject": "rejected", "edit": "approved with edited arguments"}


@app.command()
def approve(
    approval_id: str = typer.Argument(help="The approval's id (see `tether approvals`)."),
    decision: Decision = DECISION,
    args: str | None = typer.Option(
        None,
        "--args",
        help="With --decision edit: the arguments to run the tool with, a JSON object "
        '(e.g. \'{"to": "amy@example.com"}\').',
    ),
    reason: str | None = typer.Option(
        None, "--reason", help="Why; the agent sees it with a rejection."
    ),
    approver: str = typer.Option("cli", "--approver", help="Who decides, as recorded."),
    url: str = URL,
    auth_token: str | None = TOKEN,
) -> None:
    """Decide a waiting approval."""
    edited: dict[str, Any] | None = None
    if decision is Decision.EDIT:
        if args is None:
            fail("--decision edit needs --args JSON (the edited arguments)", ExitCode.USAGE)
        edited = _json_object(args)
    elif args is not None:
        fail("--args goes with --decision edit only", ExitCode.USAGE)
    with connect(url, auth_token) as client:
        client.decide(approval_id, decision.value, reason=reason, args=edited, approver=approver)
    console.print(f"{_PAST[decision.value]} {approval_id}")


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        fail(f"--args is not JSON: {exc}", ExitCode.USAGE)
    if not isinstance(value, dict):
        fail(f"--args must be a JSON object, not {type(value).__name__}", ExitCode.USAGE)
    return value


CONVERSATION = typer.Argument(help="The conversation id (records carry it).")


@app.command()
def records(conversation: str = CONVERSATION, store: str = STORE) -> None:
    """Print a conversation's records, one JSON object a line."""
    from tether.cli import _local

    _local.records(conversation, store)


@app.command()
def spans(conversation: str = CONVERSATION, store: str = STORE) -> None:
    """Re-derive a conversation's span signals (tools, reasoning) from its log, one JSON
    object a line; spans still open at the end are closed as incomplete."""
    from tether.cli import _local

    _local.spans(conversation, store)


@app.command()
def verify(conversation: str = CONVERSATION, store: str = STORE) -> None:
    """Re-derive a conversation's hash chain: exit 0 if intact, 1 naming the first bad seq."""
    from tether.cli import _local

    _local.verify(conversation, store, console)


@app.command()
def replay(
    conversation: str | None = typer.Argument(
        None, help="The conversation id (records carry it); or give --from, or --against."
    ),
    store: str = STORE,
    from_: str | None = typer.Option(
        None,
        "--from",
        help="Replay a file `tether export` wrote instead, in memory (no store is opened): "
        'print "identical" or the first seq where the code diverges from it.',
    ),
    app_: str | None = typer.Option(
        None,
        "--app",
        help="module:attr: a tether.App, or a function returning one, or returning the "
        "agents {name: AgentDefinition} (or {name: {version: AgentDefinition}}).",
    ),
    demo: bool = typer.Option(False, "--demo", help="The keyless demo agents."),
    against: str | None = typer.Option(
        None,
        "--against",
        help="The deploy gate: replay recorded sessions (no conversation id) against the "
        "newest version of each agent module:attr defines; exit 1 if one a run would resume "
        "diverges.",
    ),
    agent: str | None = typer.Option(None, "--agent", help="--against: this agent's sessions."),
    version: str | None = typer.Option(
        None, "--version", help="--against: sessions whose latest run recorded this version."
    ),
    since: str | None = typer.Option(
        None,
        "--since",
        help="--against: sessions active since this time (ISO 8601, or 2h, 3d back from now).",
    ),
    limit: int = typer.Option(
        100, "--limit", min=1, help="--against: check at most this many sessions, newest first."
    ),
) -> None:
    """Re-run a conversation from its log: zero model and tool calls; exit 1 on divergence.
    No provider key is needed, even by an app that builds its client at import. With
    --against, the deploy gate: recorded sessions replayed against the new code."""
    from tether.cli import _local
    from tether.cli._application import load_agents, newest_definitions
    from tether.cli._export import replay_file
    from tether.cli._gate import gate, parse_since
    from tether.cli._model import check_model
    from tether.cli._offline import offline_provider_keys

    if against is not None:
        if conversation is not None or from_ is not None or app_ is not None or demo:
            fail("--against takes no conversation id, --from, --app or --demo", ExitCode.USAGE)
    elif (conversation is None) == (from_ is None):
        fail("give a conversation id, --from FILE or --against APP (one of them)", ExitCode.USAGE)
    elif agent is not None or version is not None or since is not None or limit != 100:
        fail("--agent, --version, --since and --limit go with --against", ExitCode.USAGE)
    with offline_provider_keys():  # an app may build its provider's client at import
        agents = load_agents(
            against or app_, demo, option="--app" if against is None else "--against"
        )
        check_model(build_client=False)  # a bad TETHER_MODEL in one line; no key needed
        if against is not None:
            since_at = None if since is None else parse_since(since)
            gate(agents, store, console, agent=agent, version=version, since=since_at, limit=limit)
        elif from_ is not None:
            replay_file(from_, newest_definitions(agents), console)
        else:
            assert conversation is not None
            _local.replay(conversation, store, newest_definitions(agents), console)


@app.command()
def prune(
    store: str = STORE,
    retain_days: list[str] | None = RETAIN_DAYS,
    keep_records: int | None = KEEP_RECORDS,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Show what would go, and remove nothing."
    ),
) -> None:
    """Apply a retention policy once: erase idle sessions, cut the head of long logs."""
    from tether.cli import _retention

    _retention.prune(store, retain_days, keep_records, dry_run=dry_run, console=console)


@app.command()
def fork(
    conversation: str = CONVERSATION,
    at: int = typer.Option(..., "--at", min=1, help="Keep records 1..AT."),
    store: str = STORE,
) -> None:
    """Fork a conversation into a new session sharing its first AT records."""
    from tether.cli import _local

    _local.fork(conversation, at, store, console)


@app.command(name="config")
def show_config(
    worker: bool = typer.Option(
        False, "--worker", help="Show `tether worker`'s settings (default: `tether serve`'s)."
    ),
    config: Path | None = CONFIG,
) -> None:
    """Print the settings `tether serve` (or `tether worker`) would run with here, and where
    each came from (a variable, the file, the default); secrets masked."""
    from tether.cli._config import show

    show(worker=worker, config=config, console=console)


def main() -> None:
    """The ``tether`` console script."""
    try:
        app()
    except KeyboardInterrupt:
        raise SystemExit(ExitCode.INTERRUPTED) from None
