"""Every operation of the HTTP API, described once: a function per route that builds its
:class:`~tether.client._call.Call` (and, for what takes several requests, such as ``send``
following a dispatch to its settlement, a :data:`~tether.client._call.Flow`).

``TetherClient`` and ``AsyncTetherClient`` expose each of these as a method of the same name
and signature, which sends what it builds; the docstrings here are theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import date, datetime
from typing import Literal

import httpx
from pydantic import JsonValue, RootModel

from tether.client._call import Call, Flow, ask, model, path
from tether.client._defaults import WAIT_SLICE
from tether.client._outcome import Outcome
from tether.wire import (
    Aborted,
    AgentsPage,
    Alive,
    AnswerBody,
    AnswerReceipt,
    ApprovalItem,
    ApprovalsPage,
    Budget,
    BudgetDecisionBody,
    BudgetGatesPage,
    BudgetReceipt,
    ConversationView,
    Decision,
    DecisionBody,
    DecisionReceipt,
    DispatchAccepted,
    DispatchBody,
    DispatchSettled,
    ErasedView,
    ForkBody,
    Forked,
    IdentityView,
    InputItem,
    InputsPage,
    MessageBody,
    MessagesPage,
    MetadataPatch,
    MetadataView,
    OpenSubmissions,
    Ready,
    RecordsPage,
    ScheduleBody,
    ScheduleDeleted,
    ScheduleItem,
    SchedulesPage,
    SessionBody,
    SessionsPage,
    SessionState,
    SessionUsage,
    Settlement,
    SpansPage,
    SubmissionReceipt,
    SubmissionTreeNode,
    SubmissionView,
    UpgradeBody,
    UpgradeResult,
    UsageAnswer,
    Verified,
    VersionsPage,
    WebhookDeliveriesPage,
    WebhookDeliveryItem,
    WebhookStatus,
)

__all__ = (
    "Multitask",
    "abort",
    "abort_submission",
    "add_schedule",
    "agents",
    "alive",
    "answer",
    "approvals",
    "budgets",
    "compact",
    "conversation",
    "conversation_usage",
    "decide",
    "decide_budget",
    "delete_schedule",
    "dispatch",
    "erase",
    "export",
    "follow_up",
    "fork",
    "inputs",
    "me",
    "messages",
    "metrics",
    "open_submissions",
    "patch_metadata",
    "pending_approval",
    "pending_input",
    "ready",
    "records",
    "resend_webhook",
    "schedules",
    "send",
    "sessions",
    "spans",
    "steer",
    "submission",
    "submission_tree",
    "upgrade_versions",
    "usage",
    "verify",
    "versions",
    "wait",
    "webhook_deliveries",
    "webhook_delivery",
)

Multitask = Literal["enqueue", "reject", "interrupt", "steer"]
"""What a dispatch does when its session is busy (docs/serving.md)."""
_GATES_PAGE = 1000


def _session_path(template: str, agent: str, instance: str) -> str:
    return path("/agents/{}/{}" + template, agent, instance)


def _text(response: httpx.Response) -> str:
    return response.text


def _bytes(response: httpx.Response) -> bytes:
    return response.content


# --- sessions ----------------------------------------------------------------------------


def _dispatched(response: httpx.Response) -> DispatchAccepted | DispatchSettled:
    if response.status_code == 200:
        return DispatchSettled.model_validate_json(response.content)
    return DispatchAccepted.model_validate_json(response.content)


def dispatch(
    agent: str,
    instance: str,
    message: str | DispatchBody = "",
    *,
    session: str | None = None,
    wait: bool = False,
    timeout: float | None = None,
    multitask: Multitask | None = None,
    idempotency_key: str | None = None,
) -> Call[DispatchAccepted | DispatchSettled]:
    """``POST /agents/{agent}/{instance}``: admit a message (its text, or a whole
    :class:`~tether.wire.DispatchBody`) to the session (``session``, else the body's, else
    ``default``). With ``wait`` the answer is its settlement if it settles within
    ``timeout`` seconds (:class:`~tether.wire.DispatchSettled`), else where it stands.

    Example::

        accepted = client.dispatch("assistant", "ann", "hello")
        print(accepted.submission_id)
    """
    body = DispatchBody(body=message) if isinstance(message, str) else message
    if session is not None:
        body = body.model_copy(update={"session": session})
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
    return Call(
        "POST",
        _session_path("", agent, instance),
        _dispatched,
        params={
            "wait": True if wait else None,
            "timeout": timeout,
            "multitask": multitask,
        },
        body=body,
        headers=headers,
        waits=(timeout if timeout is not None else 60.0) if wait else None,
    )


def steer(
    agent: str, instance: str, body: str, *, session: str = "default"
) -> Call[SubmissionReceipt]:
    """``POST .../steer``: a message for the run in flight, read at its next model call."""
    return Call(
        "POST",
        _session_path("/steer", agent, instance),
        model(SubmissionReceipt),
        body=MessageBody(body=body, session=session),
    )


def follow_up(
    agent: str, instance: str, body: str, *, session: str = "default"
) -> Call[SubmissionReceipt]:
    """``POST .../followup``: a message that runs once the run in flight settles."""
    return Call(
        "POST",
        _session_path("/followup", agent, instance),
        model(SubmissionReceipt),
        body=MessageBody(body=body, session=session),
    )


def abort(agent: str, instance: str, *, session: str = "default") -> Call[Aborted]:
    """``POST .../abort``: cancel what the session has queued or running."""
    return Call(
        "POST",
        _session_path("/abort", agent, instance),
        model(Aborted),
        body=SessionBody(session=session),
    )


def compact(agent: str, instance: str, *, session: str = "default") -> Call[SubmissionReceipt]:
    """``POST .../compact``: summarise the session's history into a shorter one."""
    return Call(
        "POST",
        _session_path("/compact", agent, instance),
        model(SubmissionReceipt),
        body=SessionBody(session=session),
    )


def erase(
    agent: str, instance: str, *, session: str = "default", force: bool = False
) -> Call[ErasedView]:
    """``DELETE /agents/{agent}/{instance}``: erase a session (``force``: abort what is
    unsettled first, instead of a :class:`~tether.errors.SessionBusy`-like conflict)."""
    return Call(
        "DELETE",
        _session_path("", agent, instance),
        model(ErasedView),
        params={"session": session, "force": True if force else None},
    )


def sessions(
    *,
    agent: str | None = None,
    instance: str | None = None,
    status: SessionState | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    usage: bool = False,
    q: str | None = None,
    metadata: Mapping[str, str] | None = None,
    since: datetime | None = None,
) -> Call[SessionsPage]:
    """``GET /sessions``: a page of sessions, newest activity first; ``q`` (the words of
    one of its messages), ``metadata`` (a value's text form per key) and ``since`` (active
    at that time or later) search them (docs/search.md)."""
    filters = {f"metadata.{key}": value for key, value in (metadata or {}).items()}
    return Call(
        "GET",
        "/sessions",
        model(SessionsPage),
        params={
            "agent": agent,
            "instance": instance,
            "status": status,
            "limit": limit,
            "cursor": cursor,
            "usage": True if usage else None,
            "q": q,
            "since": None if since is None else since.isoformat(),
            **filters,
        },
    )


_MetadataPatch = RootModel[MetadataPatch]


def patch_metadata(
    agent: str,
    instance: str,
    patch: Mapping[str, str | bool | int | float | None],
    *,
    session: str = "default",
) -> Call[MetadataView]:
    """``PATCH .../metadata``: merge ``patch`` into the session's metadata (RFC 7396: a
    ``None`` removes its key) and return what it leaves."""
    return Call(
        "PATCH",
        _session_path("/metadata", agent, instance),
        model(MetadataView),
        params={"session": session},
        body=_MetadataPatch(dict(patch)),
        headers={"Content-Type": "application/merge-patch+json"},
    )


def records(
    agent: str,
    instance: str,
    *,
    session: str = "default",
    after: int = 0,
    limit: int | None = None,
) -> Call[RecordsPage]:
    """``GET .../records``: a page of the session's records after seq ``after``, each a
    :class:`~tether.records.Record` (its hashes as stored)."""
    return Call(
        "GET",
        _session_path("/records", agent, instance),
        model(RecordsPage),
        params={"session": session, "after": after, "limit": limit},
    )


def messages(agent: str, instance: str, *, session: str = "default") -> Call[MessagesPage]:
    """``GET .../messages``: the history as the model sees it next turn."""
    return Call(
        "GET",
        _session_path("/messages", agent, instance),
        model(MessagesPage),
        params={"session": session},
    )


def conversation(agent: str, instance: str, *, session: str = "default") -> Call[ConversationView]:
    """``GET .../conversation``: the session's conversation (its id, head, state)."""
    return Call(
        "GET",
        _session_path("/conversation", agent, instance),
        model(ConversationView),
        params={"session": session},
    )


def open_submissions(
    agent: str, instance: str, *, session: str = "default", limit: int | None = None
) -> Call[OpenSubmissions]:
    """``GET .../submissions``: the session's unsettled submissions, in order."""
    return Call(
        "GET",
        _session_path("/submissions", agent, instance),
        model(OpenSubmissions),
        params={"session": session, "limit": limit},
    )


# --- submissions -------------------------------------------------------------------------


def submission(
    submission_id: str, *, wait: bool = False, timeout: float | None = None
) -> Call[SubmissionView]:
    """``GET /submissions/{id}``: where it stands; with ``wait``, once it settles or
    ``timeout`` seconds pass."""
    return Call(
        "GET",
        path("/submissions/{}", submission_id),
        model(SubmissionView),
        params={"wait": True if wait else None, "timeout": timeout},
        waits=(timeout if timeout is not None else 60.0) if wait else None,
    )


def abort_submission(submission_id: str) -> Call[SubmissionView]:
    """``POST /submissions/{id}/abort``: cancel one submission."""
    return Call("POST", path("/submissions/{}/abort", submission_id), model(SubmissionView))


def submission_tree(submission_id: str) -> Call[SubmissionTreeNode]:
    """``GET /submissions/{id}/tree``: the submission and its subagents' submissions."""
    return Call("GET", path("/submissions/{}/tree", submission_id), model(SubmissionTreeNode))


# --- conversations -----------------------------------------------------------------------


def fork(conversation_id: str, at_seq: int, *, session: str | None = None) -> Call[Forked]:
    """``POST /conversations/{id}/fork``: a new session holding the log up to ``at_seq``."""
    return Call(
        "POST",
        path("/conversations/{}/fork", conversation_id),
        model(Forked),
        body=ForkBody(at_seq=at_seq, session=session),
    )


def verify(conversation_id: str) -> Call[Verified]:
    """``GET /conversations/{id}/verify``: check the hash chain (a broken one raises
    :class:`~tether.errors.LogTampered`)."""
    return Call("GET", path("/conversations/{}/verify", conversation_id), model(Verified))


def export(conversation_id: str) -> Call[bytes]:
    """``GET /conversations/{id}/export``: the log as NDJSON, with its trailer (what
    ``tether import`` takes)."""
    return Call("GET", path("/conversations/{}/export", conversation_id), _bytes)


def spans(conversation_id: str, *, after: int = 0, limit: int | None = None) -> Call[SpansPage]:
    """``GET /conversations/{id}/spans``: the log's executions, model and tool calls."""
    return Call(
        "GET",
        path("/conversations/{}/spans", conversation_id),
        model(SpansPage),
        params={"after": after, "limit": limit},
    )


def conversation_usage(conversation_id: str) -> Call[SessionUsage]:
    """``GET /conversations/{id}/usage``: what the session spent, its subagents too."""
    return Call("GET", path("/conversations/{}/usage", conversation_id), model(SessionUsage))


def usage(
    *,
    tenant: str | None = None,
    session: str | None = None,
    period: Literal["day", "month"] | None = None,
    at: date | None = None,
) -> Call[UsageAnswer]:
    """``GET /usage``: a tenant's spending over a day or month, or a session's
    (``session``: its conversation id)."""
    return Call(
        "GET",
        "/usage",
        model(UsageAnswer),
        params={
            "tenant": tenant,
            "session": session,
            "period": period,
            "at": None if at is None else at.isoformat(),
        },
    )


# --- gates -------------------------------------------------------------------------------


def approvals(
    *,
    status: Literal["pending", "decided", "closed", "all"] = "pending",
    agent: str | None = None,
    instance: str | None = None,
    tool: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[ApprovalsPage]:
    """``GET /approvals``: a page of approval gates."""
    return Call(
        "GET",
        "/approvals",
        model(ApprovalsPage),
        params={
            "status": status,
            "agent": agent,
            "instance": instance,
            "tool": tool,
            "limit": limit,
            "cursor": cursor,
        },
    )


def decide(
    approval_id: str,
    decision: Decision,
    *,
    reason: str | None = None,
    args: dict[str, JsonValue] | None = None,
    approver: str = "api",
) -> Call[DecisionReceipt]:
    """``POST /approvals/{id}``: ``approve``, ``reject`` or ``edit`` (with ``args``) a
    pending tool call.

    Example::

        client.decide(approval.approval_id, "approve", approver="Ann")
    """
    return Call(
        "POST",
        path("/approvals/{}", approval_id),
        model(DecisionReceipt),
        body=DecisionBody(decision=decision, reason=reason, args=args, approver=approver),
    )


def inputs(
    *,
    status: Literal["pending", "answered", "closed", "all"] = "pending",
    agent: str | None = None,
    instance: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[InputsPage]:
    """``GET /inputs``: a page of the questions runs asked."""
    return Call(
        "GET",
        "/inputs",
        model(InputsPage),
        params={
            "status": status,
            "agent": agent,
            "instance": instance,
            "limit": limit,
            "cursor": cursor,
        },
    )


def answer(input_id: str, value: JsonValue, *, responder: str = "api") -> Call[AnswerReceipt]:
    """``POST /inputs/{id}``: answer a question (any JSON value that fits its schema)."""
    return Call(
        "POST",
        path("/inputs/{}", input_id),
        model(AnswerReceipt),
        body=AnswerBody(value=value, responder=responder),
    )


def budgets(
    *,
    status: Literal["pending", "decided", "closed", "all"] = "pending",
    agent: str | None = None,
    instance: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[BudgetGatesPage]:
    """``GET /budgets``: a page of the runs that reached a budget and wait for a decision."""
    return Call(
        "GET",
        "/budgets",
        model(BudgetGatesPage),
        params={
            "status": status,
            "agent": agent,
            "instance": instance,
            "limit": limit,
            "cursor": cursor,
        },
    )


def decide_budget(
    gate_id: str,
    decision: Literal["approve", "reject"],
    *,
    extension: Budget | None = None,
    reason: str | None = None,
    approver: str = "api",
) -> Call[BudgetReceipt]:
    """``POST /budgets/{id}``: extend a budget (``approve``, by ``extension``) or end the run."""
    return Call(
        "POST",
        path("/budgets/{}", gate_id),
        model(BudgetReceipt),
        body=BudgetDecisionBody(
            decision=decision,
            reason=reason,
            approver=approver,
            # Sent when given: a rejection carries none.
            **({} if extension is None else {"extension": extension}),
        ),
    )


# --- the application ---------------------------------------------------------------------


def agents() -> Call[AgentsPage]:
    """``GET /agents``: the agents the server runs."""
    return Call("GET", "/agents", model(AgentsPage))


def schedules() -> Call[SchedulesPage]:
    """``GET /schedules``: the schedules kept."""
    return Call("GET", "/schedules", model(SchedulesPage))


def add_schedule(schedule: ScheduleBody) -> Call[ScheduleItem]:
    """``POST /schedules``: keep a schedule (docs/schedules.md)."""
    return Call("POST", "/schedules", model(ScheduleItem), body=schedule)


def delete_schedule(schedule_id: str) -> Call[ScheduleDeleted]:
    """``DELETE /schedules/{id}``."""
    return Call("DELETE", path("/schedules/{}", schedule_id), model(ScheduleDeleted))


def webhook_deliveries(
    *,
    status: WebhookStatus
    | Literal["held", "pending", "delivered", "failed", "closed"]
    | None = None,
    submission_id: str | None = None,
    limit: int | None = None,
    after: str | None = None,
) -> Call[WebhookDeliveriesPage]:
    """``GET /webhook-deliveries``: a page of the outbound webhook outbox, oldest first
    (docs/how-to/webhooks.md); ``after``: the ``next_cursor`` of the page before.

    Example::

        page = client.webhook_deliveries(status="failed")
        for item in page.deliveries:
            print(item.id, item.url, item.last_error)
    """
    return Call(
        "GET",
        "/webhook-deliveries",
        model(WebhookDeliveriesPage),
        params={
            "status": None if status is None else str(status),
            "submissionId": submission_id,
            "limit": limit,
            "after": after,
        },
    )


def webhook_delivery(delivery_id: str) -> Call[WebhookDeliveryItem]:
    """``GET /webhook-deliveries/{id}``: one delivery, with the JSON it sends (``payload``)."""
    return Call("GET", path("/webhook-deliveries/{}", delivery_id), model(WebhookDeliveryItem))


def resend_webhook(delivery_id: str) -> Call[WebhookDeliveryItem]:
    """``POST /webhook-deliveries/{id}/resend``: send a delivery again now, with the same id
    and body (a failed one, or one a receiver lost); a subscription still held is refused
    (409 ``webhook_not_sendable``)."""
    return Call(
        "POST", path("/webhook-deliveries/{}/resend", delivery_id), model(WebhookDeliveryItem)
    )


def versions(*, agent: str | None = None) -> Call[VersionsPage]:
    """``GET /versions``: the agent versions the server runs, and what is parked on others."""
    return Call("GET", "/versions", model(VersionsPage), params={"agent": agent})


def upgrade_versions(upgrade: UpgradeBody) -> Call[UpgradeResult]:
    """``POST /versions/upgrade``: move parked runs to another version (docs/versions.md)."""
    return Call("POST", "/versions/upgrade", model(UpgradeResult), body=upgrade)


def me() -> Call[IdentityView]:
    """``GET /me``: who the server takes the caller for."""
    return Call("GET", "/me", model(IdentityView))


def alive() -> Call[Alive]:
    """``GET /healthz``: whether the process answers."""
    return Call("GET", "/healthz", model(Alive))


def ready() -> Call[Ready]:
    """``GET /readyz``: whether the server can serve (a 503 raises)."""
    return Call("GET", "/readyz", model(Ready))


def metrics() -> Call[str]:
    """``GET /metrics``: the Prometheus exposition."""
    return Call("GET", "/metrics", _text)


# --- flows -------------------------------------------------------------------------------


def pending_approval(
    agent: str, instance: str, *, session: str = "default"
) -> Flow[ApprovalItem | None]:
    """The approval the session waits for, if any (paging through the instance's pending
    ones)."""
    cursor: str | None = None
    while True:
        page = yield from ask(
            approvals(agent=agent, instance=instance, limit=_GATES_PAGE, cursor=cursor)
        )
        found = [item for item in page.approvals if item.session == session]
        if found or page.next_cursor is None:
            return found[0] if found else None
        cursor = page.next_cursor


def pending_input(agent: str, instance: str, *, session: str = "default") -> Flow[InputItem | None]:
    """The question the session waits for an answer to, if any."""
    cursor: str | None = None
    while True:
        page = yield from ask(
            inputs(agent=agent, instance=instance, limit=_GATES_PAGE, cursor=cursor)
        )
        found = [item for item in page.inputs if item.session == session]
        if found or page.next_cursor is None:
            return found[0] if found else None
        cursor = page.next_cursor


def send(
    agent: str,
    instance: str,
    message: str | DispatchBody = "",
    *,
    session: str | None = None,
    wait: bool = True,
    multitask: Multitask | None = None,
    idempotency_key: str | None = None,
) -> Flow[Outcome]:
    """Dispatch a message and, with ``wait``, follow it until it settles or waits for a
    person (an approval or an input, of its own run or of one ahead of it): the
    :class:`~tether.client.Outcome`. Each request holds at most :data:`WAIT_SLICE`
    seconds, so a parked run is noticed that soon; it waits as long as the run takes.

    Example::

        outcome = client.send("assistant", "ann", "hello")
        assert outcome.settlement is not None and outcome.settlement.status == "succeeded"
    """
    answered = yield from ask(
        dispatch(
            agent,
            instance,
            message,
            session=session,
            wait=wait,
            timeout=WAIT_SLICE if wait else None,
            multitask=multitask,
            idempotency_key=idempotency_key,
        )
    )
    outcome = Outcome(
        agent,
        instance,
        answered.session,
        answered.submission_id,
        answered.conversation_id,
    )
    if isinstance(answered, DispatchSettled):
        # As a submission's view holds it: one type of settlement, however it was waited for.
        settled = answered.model_dump(exclude={"submission_id", "conversation_id", "session"})
        return replace(outcome, settlement=Settlement.model_validate(settled))
    if not wait:
        return outcome
    return (yield from _settle(outcome, answered.status))


def wait(outcome: Outcome) -> Flow[Outcome]:
    """Follow a sent message further (after its approval was decided, its input answered):
    until it settles or waits for a person again."""
    view = yield from ask(submission(outcome.submission_id))
    if view.settlement is not None:
        return replace(outcome, settlement=view.settlement)
    held = replace(outcome, approval=None, input=None)
    return (yield from _settle(held, view.status))


def _settle(outcome: Outcome, status: str | None) -> Flow[Outcome]:
    agent, instance, session = outcome.agent, outcome.instance, outcome.session
    while True:
        if status in ("waiting", "queued"):
            gate = yield from pending_approval(agent, instance, session=session)
            if gate is not None:
                return replace(outcome, approval=gate)
            asked = yield from pending_input(agent, instance, session=session)
            if asked is not None:
                return replace(outcome, input=asked)
        view = yield from ask(submission(outcome.submission_id, wait=True, timeout=WAIT_SLICE))
        status = view.status
        if view.settlement is not None:
            return replace(outcome, settlement=view.settlement)
