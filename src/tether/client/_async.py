"""The asyncio client, :class:`AsyncTetherClient`: each operation of ``_operations`` sent
over an ``httpx.AsyncClient``, and the session stream followed across disconnects."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Self, TypeVar, cast, overload

import httpx

from tether.client import _operations as op
from tether.client._call import Call, Flow
from tether.client._defaults import DEFAULT_URL
from tether.client._errors import error_from_response
from tether.client._stream import (
    RECONNECT,
    STREAM_IDLE,
    Backoff,
    Follow,
    Retry,
    Streamed,
    canonical_event,
    stored_record,
)

if TYPE_CHECKING:
    from tether.records import Record
    from tether.stream import StreamEvent

__all__ = ("AsyncTetherClient",)

P = ParamSpec("P")
T = TypeVar("T")


class _Operation(Generic[P, T]):
    """An operation as a coroutine method of :class:`AsyncTetherClient`: what ``build``
    describes, sent."""

    def __init__(self, build: Callable[P, Call[T] | Flow[T]]) -> None:
        self._build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, client: AsyncTetherClient, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...
    def __get__(
        self, client: AsyncTetherClient | None, owner: type[Any]
    ) -> Self | Callable[P, Awaitable[T]]:
        if client is None:
            return self

        @functools.wraps(self._build)
        async def send(*args: P.args, **kwargs: P.kwargs) -> T:
            return await client.run(self._build(*args, **kwargs))

        return send


class AsyncTetherClient:
    """:class:`~tether.client.TetherClient` for asyncio: the same methods, each a
    coroutine, and :meth:`stream` an async iterator.

    Example::

        from tether.client import AsyncTetherClient

        async with AsyncTetherClient("http://127.0.0.1:8484", token="...") as client:
            outcome = await client.send("assistant", "ann", "hello")
            async for item in client.stream("assistant", "ann", follow=False):
                print(item.id, item.data.type)
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        token: str | None = None,
        timeout: float | None = 30.0,
        headers: dict[str, str] | None = None,
        backoff: Backoff = RECONNECT,
        transport: httpx.AsyncBaseTransport | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        sent = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        self.backoff = backoff
        self.http = http_client or httpx.AsyncClient(
            base_url=base_url,
            headers={**sent, **(headers or {})},
            timeout=timeout,
            transport=transport,
        )
        """The ``httpx.AsyncClient`` underneath (``http_client``, when given one: then
        ``base_url``, ``token``, ``headers`` and ``transport`` are its own business), for what
        the methods do not cover."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.aclose()

    async def call(self, call: Call[T]) -> T:
        """Send one described request; its answer parsed, or its error raised."""
        response = await self.http.request(
            call.method,
            call.path,
            params=call.query(),
            content=call.content(),
            headers=call.request_headers(),
            timeout=call.timeout(self.http.timeout),
        )
        if response.is_error:
            raise error_from_response(response.status_code, response.content)
        return call.parse(response)

    async def run(self, described: Call[T] | Flow[T]) -> T:
        """Send a call, or each call of a flow, to its result."""
        if isinstance(described, Call):
            return await self.call(described)
        try:
            call = next(described)
            while True:
                call = described.send(await self.call(call))
        except StopIteration as done:
            return cast(T, done.value)

    # --- the stream ----------------------------------------------------------------------

    def stream(
        self,
        agent: str,
        instance: str,
        *,
        session: str = "default",
        follow: bool = True,
        after: int = 0,
        last_event_id: str | None = None,
        children: bool = False,
    ) -> AsyncGenerator[Streamed[StreamEvent], None]:
        """The session's canonical stream events (``view=stream``), each with its id. A
        lost connection (the server restarted, say) is reopened after the last event handed
        over (``Last-Event-ID``), with :attr:`backoff`: no event is missed or repeated.
        Without ``follow`` it ends once the session is at rest; with it, never.

        Example::

            async for item in client.stream("assistant", "ann"):
                if item.data.type == "full":
                    print(item.data.content)
        """
        return self._follow(
            Follow(
                agent,
                instance,
                canonical_event,
                "stream",
                session=session,
                follow=follow,
                after=after,
                children=children,
                last_event_id=last_event_id,
            )
        )

    def stream_records(
        self,
        agent: str,
        instance: str,
        *,
        session: str = "default",
        follow: bool = True,
        after: int = 0,
        last_event_id: str | None = None,
        children: bool = False,
    ) -> AsyncGenerator[Streamed[Record], None]:
        """The session's records as stored (``view=records``), followed as :meth:`stream`."""
        return self._follow(
            Follow(
                agent,
                instance,
                stored_record,
                "records",
                session=session,
                follow=follow,
                after=after,
                children=children,
                last_event_id=last_event_id,
            )
        )

    async def _follow(self, state: Follow[T]) -> AsyncGenerator[Streamed[T], None]:
        delay = self.backoff.delays()
        lost_at: float | None = None
        timeout = httpx.Timeout(self.timeout, read=STREAM_IDLE)
        while True:
            failure: Exception | None = None
            try:
                async with self.http.stream(
                    "GET",
                    state.path,
                    params=state.params(),
                    headers=state.headers(),
                    timeout=timeout,
                ) as response:
                    if response.is_error:
                        await response.aread()
                        raise state.refusal(response.status_code, response.content)
                    delay, lost_at = self.backoff.delays(), None
                    async for line in response.aiter_lines():
                        if (item := state.feed(line)) is not None:
                            yield item
                if not state.follow:
                    return
            except (httpx.TransportError, Retry) as exc:
                failure = exc
            now = time.monotonic()
            lost_at = now if lost_at is None else lost_at
            if failure is not None and now - lost_at > self.backoff.give_up_after:
                raise failure.error if isinstance(failure, Retry) else failure
            await asyncio.sleep(delay())

    # --- every route ---------------------------------------------------------------------

    dispatch = _Operation(op.dispatch)
    send = _Operation(op.send)
    wait = _Operation(op.wait)
    steer = _Operation(op.steer)
    follow_up = _Operation(op.follow_up)
    abort = _Operation(op.abort)
    compact = _Operation(op.compact)
    erase = _Operation(op.erase)
    sessions = _Operation(op.sessions)
    patch_metadata = _Operation(op.patch_metadata)
    records = _Operation(op.records)
    messages = _Operation(op.messages)
    conversation = _Operation(op.conversation)
    open_submissions = _Operation(op.open_submissions)
    submission = _Operation(op.submission)
    abort_submission = _Operation(op.abort_submission)
    submission_tree = _Operation(op.submission_tree)
    fork = _Operation(op.fork)
    verify = _Operation(op.verify)
    export = _Operation(op.export)
    spans = _Operation(op.spans)
    conversation_usage = _Operation(op.conversation_usage)
    usage = _Operation(op.usage)
    approvals = _Operation(op.approvals)
    pending_approval = _Operation(op.pending_approval)
    decide = _Operation(op.decide)
    inputs = _Operation(op.inputs)
    pending_input = _Operation(op.pending_input)
    answer = _Operation(op.answer)
    budgets = _Operation(op.budgets)
    decide_budget = _Operation(op.decide_budget)
    agents = _Operation(op.agents)
    schedules = _Operation(op.schedules)
    add_schedule = _Operation(op.add_schedule)
    delete_schedule = _Operation(op.delete_schedule)
    versions = _Operation(op.versions)
    upgrade_versions = _Operation(op.upgrade_versions)
    webhook_deliveries = _Operation(op.webhook_deliveries)
    webhook_delivery = _Operation(op.webhook_delivery)
    resend_webhook = _Operation(op.resend_webhook)
    me = _Operation(op.me)
    alive = _Operation(op.alive)
    ready = _Operation(op.ready)
    metrics = _Operation(op.metrics)
