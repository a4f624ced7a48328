"""The served agents as an MCP server (docs/mcp.md#serve-agents-over-mcp): each agent is a
tool that dispatches a message and waits for its answer, reporting the run's canonical stream
as progress notifications, and the approvals inbox is three tools, ``list_approvals``,
``approve`` and ``reject``. It speaks the SDK's streamable HTTP at ``/mcp`` of the app,
behind the Guard.

Each call is authorized by the credential of the HTTP request that carries it (the identity
the Guard found): the scopes, agents and tenant that ``POST /agents/...`` and ``/approvals``
ask for apply unchanged, and a tool the identity may not use is not listed. Only an app made
with ``mcp=True`` imports this module: the ``mcp`` SDK is an extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from pydantic.alias_generators import to_camel
from starlette.requests import HTTPConnection
from starlette.routing import Route

from tether._ids import new_ulid
from tether.auth import Authorize, Identity, Scope
from tether.engine import AgentDefinition, ProgressSubscription, Runtime
from tether.errors import ApprovalNotFound, ConversationNotFound, TetherError
from tether.http._access import (
    Access,
    actor_of,
    authorize_session,
    check_scope,
    identity_of,
    listed_agent,
    own_conversation,
    own_gate,
)
from tether.http._dependencies import AppState
from tether.http._gate_pages import GatePageQuery
from tether.http._responses import approval_item
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetDecided,
    BudgetRequested,
    InputAnswered,
    InputRequested,
    Record,
    SettlementStatus,
    SubmissionSettled,
)
from tether.store import GateKind, SessionKey
from tether.stream import (
    StreamEvent,
    StreamProjector,
    StreamTaskMessageDelta,
    StreamTaskMessageFull,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolResponseContent,
)

__all__ = ("APPROVALS_TOOLS", "MCP_PATH", "AgentsOverMcp")

MCP_PATH: Final = "/mcp"
"""Where an app made with ``mcp=True`` speaks MCP (streamable HTTP)."""
LIST_APPROVALS: Final = "list_approvals"
APPROVE: Final = "approve"
REJECT: Final = "reject"
APPROVALS_TOOLS: Final = (LIST_APPROVALS, APPROVE, REJECT)
"""The approvals inbox's tools, named apart from the agents' (an agent of one of these names
is refused when the app is made)."""
_SHOWN = 200  # characters of a tool's arguments or answer a progress message repeats


class _Arguments(BaseModel):
    """A tool's arguments: camelCase on the wire, nothing unknown taken."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="forbid")


class AskArguments(_Arguments):
    message: str = Field(min_length=1, description="What to tell the agent.")
    session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The sessionId an earlier call of this tool answered with: continue that "
        "session (the agent sees its history). Absent: a new session.",
    )
    instance: str = Field(
        default="mcp",
        min_length=1,
        max_length=200,
        description="Whose the new session is (a user, a customer: the agent's instance). "
        "Ignored with sessionId.",
    )


class ListArguments(_Arguments):
    agent: str | None = Field(default=None, max_length=200, description="Only this agent's.")
    limit: int = Field(default=20, ge=1, le=100)
    cursor: str | None = Field(
        default=None, max_length=2000, description="A page's nextCursor: the page after it."
    )


class DecideArguments(_Arguments):
    approval_id: str = Field(min_length=1, max_length=300, description="The approval to decide.")
    reason: str | None = Field(default=None, max_length=2000)
    wait: bool = Field(
        default=True,
        description="Wait for the run to go on and answer with what it then says (or the "
        "next approval it waits for); false: answer once the decision is recorded.",
    )


def _schema(arguments: type[_Arguments]) -> dict[str, Any]:
    schema = arguments.model_json_schema(by_alias=True)
    schema.pop("title", None)
    return schema


@dataclass(frozen=True, slots=True)
class _Call:
    """What a tool call acts with: the runtime, the caller's access (its identity and the
    app's ``authorize`` hook), and the MCP session to report progress on."""

    runtime: Runtime
    identity: Identity
    authorize: Authorize | None
    session: ServerSession

    def access(self, action: Scope) -> Access:
        return Access(self.identity, self.authorize, action)

    def require(self, scope: Scope, agent: str | None = None) -> None:
        """As a route's scope dependency: ``Forbidden`` naming what the identity lacks."""
        check_scope(self.identity, scope, agent)


@dataclass(slots=True)
class _Progress:
    """The call's progress notifications (none if the client gave no progress token), and
    the tool progress it forwards."""

    session: ServerSession
    tools: ProgressSubscription
    sent: int = 0

    async def say(self, message: str) -> None:
        self.sent += 1
        await self.session.report_progress(self.sent, None, message)


@dataclass(slots=True)
class _Run:
    """Where a followed submission stands: the gates it waits on, or how it settled."""

    waits: dict[str, tuple[str, Mapping[str, JsonValue]]] = field(default_factory=dict)
    """Open gates by id: their kind (``approval``, ``input``, ``budget``) and what to show."""
    settled: SubmissionSettled | None = None


class AgentsOverMcp:
    """The MCP server of one app: the SDK's low-level ``Server`` with a tool per agent of
    ``agents`` and the approvals tools, and its streamable-HTTP session manager, which the
    app's lifespan runs (:meth:`running`) and :attr:`route` serves.

    Example::

        mcp = AgentsOverMcp(runtime.agents)
        app.router.routes.append(mcp.route)
        async with mcp.running():
            ...
    """

    def __init__(self, agents: Mapping[str, AgentDefinition]) -> None:
        clash = sorted(set(agents) & set(APPROVALS_TOOLS))
        if clash:
            raise ValueError(
                f"the agent {clash[0]!r} has the name of an approvals tool over MCP "
                f"({', '.join(APPROVALS_TOOLS)}): rename it to serve it with mcp"
            )
        self.descriptions = {name: definition.description for name, definition in agents.items()}
        self.server: Server[Any] = Server(
            "tether",
            instructions="Tether's durable agents, one tool each, and the approvals inbox.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        # Stateful sessions, so a call's progress goes out on its response's stream;
        # the Guard in front already checks the Host and Origin and bounds the body.
        self.manager = StreamableHTTPSessionManager(app=self.server)
        self.route = Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(self.manager))

    def running(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The session manager's task group, for the app's lifespan."""
        return self.manager.run()

    # --- the SDK's handlers ------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        identity = identity_of(_request(ctx))
        tools = [
            self._agent_tool(agent)
            for agent in self.descriptions
            if identity.allows("sessions:write") and identity.may_use(agent)
        ]
        if identity.allows("approvals:read"):
            tools.append(_LIST_TOOL)
        if identity.allows("approvals:decide"):
            tools.extend(_DECIDE_TOOLS)
        return types.ListToolsResult(tools=tools)

    def _agent_tool(self, agent: str) -> types.Tool:
        described = self.descriptions[agent]
        return types.Tool(
            name=agent,
            description=(f"{described}\n\n" if described else f"The agent {agent}. ")
            + "Sends it a message as a durable run and answers with its reply and the "
            "sessionId that continues the session. A run that waits for a person's approval "
            "answers so, with the approval's id (see approve).",
            input_schema=_schema(AskArguments),
            annotations=types.ToolAnnotations(read_only_hint=False, open_world_hint=True),
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        request = _request(ctx)
        state: AppState = request.app.state.tether
        call = _Call(state.runtime, identity_of(request), state.authorize, ctx.session)
        handlers: dict[str, Callable[[_Call, dict[str, Any]], Awaitable[types.CallToolResult]]]
        handlers = {LIST_APPROVALS: _list_approvals, APPROVE: _approve, REJECT: _reject}
        handler = handlers.get(params.name)
        if handler is None and params.name not in self.descriptions:
            raise MCPError(types.INVALID_PARAMS, f"no tool named {params.name!r}")
        arguments = dict(params.arguments or {})
        try:
            if handler is not None:
                return await handler(call, arguments)
            return await _ask(call, params.name, arguments)
        except ValidationError as exc:
            return _error("invalid_arguments", _validation_message(exc))
        except TetherError as exc:
            return _error(exc.code, str(exc))


def _request(ctx: ServerRequestContext[Any]) -> HTTPConnection:
    """The HTTP request that carried the message (its scope holds the Guard's identity)."""
    request = ctx.request
    if not isinstance(request, HTTPConnection):  # only streamable HTTP serves this server
        raise MCPError(types.INTERNAL_ERROR, "no HTTP request carried this message")
    return request


# --- the agents --------------------------------------------------------------------------


async def _ask(call: _Call, agent: str, given: dict[str, Any]) -> types.CallToolResult:
    """Dispatch the message to ``agent`` (a new session, or the one ``sessionId`` names),
    then follow the run until it settles or waits for a person."""
    arguments = AskArguments.model_validate(given)
    runtime, identity = call.runtime, call.identity
    call.require("sessions:write", agent)
    access = call.access("sessions:write")
    if arguments.session_id is not None:
        conversation = await own_conversation(runtime, access, arguments.session_id)
        if conversation.key.agent != agent:  # another agent's session is none of this tool's
            raise ConversationNotFound(arguments.session_id)
        instance, session = conversation.key.instance, conversation.key.session
        after = await runtime.wait_for_append(conversation.id, after=0)  # its head: at once
    else:
        instance, session, after = arguments.instance, f"mcp-{new_ulid().lower()}", 0
        await authorize_session(runtime, access, agent, instance, session)
    message: dict[str, Any] = {"kind": "user", "body": arguments.message}
    if (by := actor_of(identity)) is not None:  # who sent it, recorded on the message
        message["by"] = by
    # Subscribed first: the run's tools may report before the dispatch returns.
    with _tool_reports(runtime, SessionKey(agent, instance, session)) as tools:
        receipt = await runtime.dispatch(
            agent, instance, message, session=session, tenant=identity.tenant
        )
        progress = _Progress(call.session, tools)
        # First, so a client that gives up (or cancels) still knows where its run went on.
        await progress.say(
            f"admitted as submission {receipt.submission_id} in session {receipt.conversation_id}"
        )
        run = await _follow(
            runtime, receipt.conversation_id, receipt.submission_id, after, progress
        )
    return _answer(run, receipt.conversation_id, receipt.submission_id)


async def _follow(
    runtime: Runtime,
    conversation_id: str,
    submission_id: str,
    after: int,
    progress: _Progress,
) -> _Run:
    """Read the submission's records after seq ``after`` as they are appended, reporting what
    its canonical stream says and what its tools report of their progress (those that run
    in this process: ``Runtime.progress``), until it settles or waits on a person (an
    approval, an input, a budget) with nothing more to read. A cancelled call stops reading
    here only: the durable run goes on."""
    projector = StreamProjector()
    run = _Run()
    cursor = after
    while True:
        records = await runtime.records(conversation_id, after=cursor)
        if not records:
            if run.waits:
                return run
            await _appended_or_reported(runtime, conversation_id, cursor, progress.tools)
            for reported in progress.tools.take():
                if reported.correlation.submission_id == submission_id and reported.text:
                    await progress.say(reported.text)
            continue
        for record in records:
            cursor = record.seq
            if record.submission_id != submission_id:
                continue
            for event in projector.feed(record):
                said = _said(event)
                if said:
                    await progress.say(said)
            _note(run, record)
            if run.settled is not None:
                return run


@contextlib.contextmanager
def _tool_reports(runtime: Runtime, key: SessionKey) -> Iterator[ProgressSubscription]:
    """The progress the tools of ``key``'s runs in this process report, while it lasts."""
    subscription = runtime.progress.subscribe(key)
    try:
        yield subscription
    finally:
        runtime.progress.unsubscribe(key, subscription)


async def _appended_or_reported(
    runtime: Runtime, conversation_id: str, after: int, tools: ProgressSubscription
) -> None:
    """Until the log passes seq ``after``, or a tool of the session reports progress."""
    appended = asyncio.ensure_future(runtime.wait_for_append(conversation_id, after=after))
    reported = tools.arrived()
    try:
        await asyncio.wait((appended, reported), return_when=asyncio.FIRST_COMPLETED)
    finally:
        appended.cancel()
        reported.cancel()


def _note(run: _Run, record: Record) -> None:
    """What ``record`` changes of where the run stands."""
    payload = record.payload
    if isinstance(payload, ApprovalRequested):
        run.waits[payload.approval_id] = ("approval", {"tool": payload.tool, "args": payload.args})
    elif isinstance(payload, InputRequested):
        run.waits[payload.input_id] = ("input", {"prompt": payload.prompt})
    elif isinstance(payload, BudgetRequested):
        run.waits[payload.gate_id] = ("budget", {"limit": payload.limit})
    elif isinstance(payload, ApprovalDecided | InputAnswered):
        run.waits.pop(
            payload.approval_id if isinstance(payload, ApprovalDecided) else payload.input_id,
            None,
        )
    elif isinstance(payload, BudgetDecided):
        run.waits.pop(payload.gate_id, None)
    elif isinstance(payload, SubmissionSettled):
        run.settled, run.waits = payload, {}


def _said(event: StreamEvent) -> str | None:
    """A progress message for a canonical stream event: the answer's text as it streams, a
    whole message, a tool call and its answer (``None``: nothing to say)."""
    if isinstance(event, StreamTaskMessageDelta):
        delta = event.delta
        return delta.text_delta if isinstance(delta, TextDelta) else None
    if not isinstance(event, StreamTaskMessageFull):
        return None
    content = event.content
    if isinstance(content, TextContent) and content.author == "agent":
        return content.content
    if isinstance(content, ToolRequestContent):
        return f"calling {content.name} {_short(content.arguments)}"
    if isinstance(content, ToolResponseContent):
        failed = " with an error" if content.is_error else ""
        # A run followed from a decision on has not shown the call: no name known.
        return f"{content.name or 'the tool'} answered{failed}: {_short(content.content)}"
    return None


def _answer(run: _Run, conversation_id: str, submission_id: str) -> types.CallToolResult:
    """The tool's result: the answer, a failure, or the gates the run waits on."""
    where: dict[str, Any] = {"sessionId": conversation_id, "submissionId": submission_id}
    settled = run.settled
    if settled is None:
        waits = [
            {"id": gate_id, "kind": kind, **shown} for gate_id, (kind, shown) in run.waits.items()
        ]
        lines = [
            f"The run waits for a person: {_waiting(gate_id, kind, shown)}"
            for gate_id, (kind, shown) in run.waits.items()
        ]
        lines.append(
            f"It goes on once decided, durably; sessionId {conversation_id} continues the session."
        )
        return _result("\n".join(lines), {"status": "waiting", "waits": waits, **where})
    if settled.status is SettlementStatus.SUCCEEDED:
        answer = settled.result
        text = answer if isinstance(answer, str) else json.dumps(answer)
        return _result(text, {"status": "succeeded", "answer": answer, **where})
    error = {
        "status": settled.status.value,
        "error": settled.error,
        "errorCode": settled.error_code,
    }
    return _result(
        f"The run {settled.status.value}: {settled.error or settled.error_code}",
        {**error, **where},
        is_error=True,
    )


def _waiting(gate_id: str, kind: str, shown: Mapping[str, JsonValue]) -> str:
    if kind == "approval":
        return (
            f"approval {gate_id} of {shown['tool']} {_short(shown['args'])} "
            f"(decide it with {APPROVE} or {REJECT})"
        )
    if kind == "input":
        return f"input {gate_id}, asking {shown['prompt']!r} (POST /inputs/{gate_id} answers it)"
    return f"budget {gate_id}, its {shown['limit']} used up (POST /budgets/{gate_id} decides it)"


# --- the approvals inbox -----------------------------------------------------------------


async def _list_approvals(call: _Call, given: dict[str, Any]) -> types.CallToolResult:
    """A page of pending approvals, as ``GET /approvals`` lists them for the identity."""
    arguments = ListArguments.model_validate(given)
    call.require("approvals:read")
    identity = call.identity
    query = GatePageQuery(
        agent=listed_agent(identity, arguments.agent),
        instance=None,
        limit=arguments.limit,
        cursor=arguments.cursor,
        tenant=identity.tenant,
    )
    page = await query.read(call.runtime, GateKind.APPROVAL, "pending")
    items = [approval_item(gate).model_dump(mode="json", exclude_none=True) for gate in page.gates]
    lines = [
        f"approval {item['approvalId']}: {item['agent']}/{item['instance']} "
        f"wants {item['tool']} {_short(item['args'])}"
        for item in items
    ]
    text = "\n".join(lines) if lines else "No approval is pending."
    return _result(text, {"approvals": items, "nextCursor": page.next_cursor})


async def _approve(call: _Call, given: dict[str, Any]) -> types.CallToolResult:
    return await _decide(call, "approve", given)


async def _reject(call: _Call, given: dict[str, Any]) -> types.CallToolResult:
    return await _decide(call, "reject", given)


async def _decide(
    call: _Call, decision: Literal["approve", "reject"], given: dict[str, Any]
) -> types.CallToolResult:
    """Decide an approval as ``POST /approvals/{id}`` does; with ``wait``, follow its run
    until it settles or waits again."""
    arguments = DecideArguments.model_validate(given)
    call.require("approvals:decide")
    runtime, identity, approval_id = call.runtime, call.identity, arguments.approval_id
    await own_gate(
        runtime, call.access("approvals:decide"), approval_id, ApprovalNotFound(approval_id)
    )
    by = actor_of(identity)
    record = await runtime.approve(
        approval_id,
        decision,
        approver=identity.name if by is not None else "mcp",
        reason=arguments.reason,
        by=by,
    )
    conversation_id = record.conversation_id
    submission_id = record.submission_id or await _gate_submission(runtime, approval_id)
    if not arguments.wait:
        ids = {"sessionId": conversation_id, "submissionId": submission_id}
        return _result(
            f"{decision}d approval {approval_id}",
            {"status": "decided", "decision": decision, **ids},
        )
    key = (await runtime.conversation_by_id(conversation_id)).key
    with _tool_reports(runtime, key) as tools:
        progress = _Progress(call.session, tools)
        run = await _follow(runtime, conversation_id, submission_id, record.seq, progress)
    return _answer(run, conversation_id, submission_id)


async def _gate_submission(runtime: Runtime, approval_id: str) -> str:
    """The submission whose run asked for the approval (its request record's)."""
    conversation_id, _, seq = approval_id.rpartition(".")
    [request] = await runtime.records(conversation_id, after=int(seq) - 1, limit=1)
    assert request.submission_id is not None  # an approval is requested inside a run
    return request.submission_id


_LIST_TOOL: Final = types.Tool(
    name=LIST_APPROVALS,
    description="The tool calls of Tether's runs that wait for a person's approval (those "
    "you may see), oldest first.",
    input_schema=_schema(ListArguments),
    annotations=types.ToolAnnotations(read_only_hint=True),
)
_DECIDE_TOOLS: Final = tuple(
    types.Tool(
        name=name,
        description=f"{verb} a tool call that waits for approval (an approvalId from "
        f"{LIST_APPROVALS}, or from an agent's answer). The run then goes on: by default "
        "this waits for it and answers with what it says next.",
        input_schema=_schema(DecideArguments),
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=destructive),
    )
    for name, verb, destructive in ((APPROVE, "Approve", True), (REJECT, "Reject", False))
)


# --- results -----------------------------------------------------------------------------


def _result(
    text: str, structured: dict[str, Any], *, is_error: bool = False
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=structured,
        is_error=is_error,
    )


def _error(code: str, message: str) -> types.CallToolResult:
    """A refusal, as the HTTP routes' envelope says it."""
    return _result(
        f"{code}: {message}", {"error": {"type": code, "message": message}}, is_error=True
    )


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
        for error in exc.errors()
    )


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}..."
