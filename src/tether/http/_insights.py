"""What a session's reader asks beyond its records (the console does, docs/console.md): the
agents served, a session's conversation and head, the spans of its log, its usage.

``GET /agents`` lists the registered agents; ``GET /agents/{agent}/{instance}/conversation``
names a session's conversation and how far its log goes (so a reader can open its stream
near the end of a long log); ``GET /conversations/{id}/spans`` pages the spans derived from
the log (``_spans``); ``GET /conversations/{id}/usage`` totals its model calls, per child too.
"""

from __future__ import annotations

from fastapi import APIRouter, Query

from tether.engine import ChildUsage, Runtime
from tether.http._access import AccessDependency, own_conversation, own_session
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import failures
from tether.http._requests import SEQ_AFTER
from tether.http._responses import stream_url
from tether.http._spans import SpanBuilder
from tether.http._submission_views import usage_view
from tether.store import SessionKey
from tether.wire import (
    AgentItem,
    AgentsPage,
    ChildUsageView,
    ConversationView,
    SessionParent,
    SessionUsage,
    SpansPage,
    UsageView,
)

__all__ = (
    "child_usage_view",
    "insights_router",
)

_READ = 1000
"""Records read per step while spans are derived."""
MAX_SPANS_PAGE = 500


insights_router = APIRouter(tags=["conversations"])
"""Agents, a session's conversation, spans, usage."""


@insights_router.get("/agents", tags=["sessions"], responses=failures())
async def agents(runtime: RuntimeDependency) -> AgentsPage:
    """The agents this server runs."""
    versions = await runtime.resolve_versions()
    return AgentsPage(
        agents=[
            AgentItem(
                name=name,
                description=definition.description,
                delegates_to=list(runtime.subagents.spawns.get(name, ())),
                version=versions.of(name)[0].version,
                versions=[v.version for v in versions.of(name)],
                policy=versions.policy(name),
            )
            for name, definition in sorted(runtime.agents.items())
        ]
    )


@insights_router.get("/agents/{agent}/{instance}/conversation", responses=failures(404, 422, 503))
async def conversation(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    session: str = Query(default="default", max_length=200),
) -> ConversationView:
    """The session's conversation and its head (404 before its first message)."""
    found = await own_session(runtime, access, agent, instance, session)
    # A log is never empty (conversation_created comes first): this answers at once.
    head = await runtime.wait_for_append(found.id, after=0)
    parent = found.parent
    return ConversationView(
        conversation_id=found.id,
        agent=agent,
        instance=instance,
        session=session,
        created_at=found.created_at.isoformat(),
        head=head,
        parent=None
        if parent is None
        else SessionParent(
            conversation_id=parent.conversation_id,
            seq=parent.seq,
            reason=parent.reason,
            call_id=parent.call_id,
        ),
        stream_url=stream_url(SessionKey(agent, instance, session)),
    )


@insights_router.get("/conversations/{conversation_id}/spans", responses=failures(404, 422, 503))
async def spans(
    runtime: RuntimeDependency,
    access: AccessDependency,
    conversation_id: str,
    after: int = SEQ_AFTER,
    limit: int = Query(default=200, ge=1, le=MAX_SPANS_PAGE),
) -> SpansPage:
    """A page of the spans derived from the log (executions, model calls, tool calls)
    that start after seq ``after``, in the order they started, each with its duration
    once it has ended. The log is read from ``after`` until the page's spans have
    ended (or the log does)."""
    await own_conversation(runtime, access, conversation_id)
    return await _spans_page(runtime, conversation_id, after=after, limit=limit)


@insights_router.get("/conversations/{conversation_id}/usage", responses=failures(404, 422, 503))
async def usage(
    runtime: RuntimeDependency, access: AccessDependency, conversation_id: str
) -> SessionUsage:
    """Token usage and cost of the conversation's model calls, its children's included
    (each child also listed). An unknown price leaves ``cost`` out, never zero."""
    await own_conversation(runtime, access, conversation_id)
    totals = await runtime.usage(conversation_id)
    return SessionUsage(
        conversation_id=conversation_id,
        usage=usage_view(totals),
        children=[child_usage_view(child) for child in totals.children],
    )


async def _spans_page(
    runtime: Runtime, conversation_id: str, *, after: int, limit: int
) -> SpansPage:
    """Read the log from ``after`` until its first ``limit`` spans there have ended (or the
    log does): a span's end may lie far past its start (a tool parked for a human)."""
    builder = SpanBuilder(after=after)
    cursor, ended, full = after, 0, False  # ended: how many of those first spans ended
    while not full:
        page = await runtime.records(conversation_id, after=cursor, limit=_READ)
        for record in page:
            builder.feed(record)
            cursor = record.seq
            spans = builder.spans
            while ended < min(limit, len(spans)) and spans[ended].end_seq is not None:
                ended += 1
            full = ended == limit
            if full:
                break
        if len(page) < _READ:
            break
    kept = builder.spans[:limit]
    more = full or len(builder.spans) > limit  # (so a page after the last may be empty)
    return SpansPage(
        conversation_id=conversation_id, spans=kept, next=kept[-1].start_seq if more else None
    )


def child_usage_view(child: ChildUsage) -> ChildUsageView:
    usage = child.usage
    return ChildUsageView(
        submission_id=child.submission_id,
        conversation_id=child.conversation_id,
        agent=child.agent,
        usage=UsageView(
            calls=child.calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost=child.cost if child.calls else None,
        ),
    )
