"""Subagents on the parent's stream (issue 21, item 7): the task events with the child's
stream URL, and ``?children=true``, which sends the children's events under their task
call and resumes at every event, live or not."""

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from tether.stream import project

from .conftest import Server
from .delegation import WAIT, Gate, nested_team, team

Serve = Callable[..., Any]
ME = "/agents/assistant/me"


@dataclass(frozen=True)
class Sse:
    id: str | None
    event: str
    data: dict[str, Any]


async def sse(
    client: httpx.AsyncClient, path: str = ME, *, last_event_id: str | None = None, **params: Any
) -> AsyncIterator[Sse]:
    """The stream's events, progress (no ``id``) included; comments are skipped."""
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    # Parameters go in the URL beside its own (httpx's params= would replace a link's query).
    url = httpx.URL(path).copy_merge_params(params)
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
            elif "data" in fields:
                yield Sse(fields.get("id"), fields["event"], orjson.loads(fields["data"]))
                fields = {}
            else:
                fields = {}


async def collect(client: httpx.AsyncClient, path: str = ME, **options: Any) -> list[Sse]:
    """The stored events of a stream that ends (no progress)."""
    return [e async for e in sse(client, path, **options) if e.id is not None]


def inner(event: Sse) -> dict[str, Any]:
    """A child event's own record (records view) or canonical event (stream view)."""
    return dict(event.data["record"] if "record" in event.data else event.data["event"])


async def expected(server: Server, conversation_id: str, view: str) -> list[dict[str, Any]]:
    """What a source sends, from its log: its records, or their canonical events."""
    log = await server.store.read(conversation_id)
    if view == "records":
        return [orjson.loads(record.to_json()) for record in log]
    return [e.model_dump(mode="json", exclude_none=True) for e in project(log)]


def by_source(events: list[Sse]) -> dict[str, list[dict[str, Any]]]:
    """Each source's events in the order sent: ``""`` the session's own, else by child."""
    sources: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if event.event == "child":
            sources.setdefault(event.data["childSubmissionId"], []).append(inner(event))
        else:
            sources.setdefault("", []).append(event.data)
    return sources


def _outcome_of(event: Sse, call_id: str) -> bool:
    data = event.data
    if event.event == "tool_outcome":
        return bool(data["payload"]["callId"] == call_id)
    content: dict[str, Any] = data.get("content", {})
    return content.get("type") == "tool_response" and content.get("tool_call_id") == call_id


def _spawn_of(event: Sse, call_id: str) -> bool:
    data = event.data
    if event.event == "task_spawned":
        return bool(data["payload"]["callId"] == call_id)
    content: dict[str, Any] = data.get("content", {})
    task: dict[str, Any] = content.get("data", {}) if content.get("type") == "data" else {}
    return task.get("kind") == "task_spawned" and task.get("callId") == call_id


async def check_family(server: Server, events: list[Sse], view: str, depth: int = 1) -> None:
    """Every source sent all of its events once, in order, each child's between its task
    call's spawn and its outcome in its parent's stream (``depth`` levels of them)."""
    root = events[0].data.get("conversationId") if view == "records" else None
    conversation_id = root or (await server.client.get(f"{ME}/records")).json()["conversationId"]
    sources = by_source(events)
    assert sources.pop("") == await expected(server, conversation_id, view)
    children = {e.data["childSubmissionId"]: e.data for e in events if e.event == "child"}
    assert set(sources) == set(children)
    for child, header in children.items():
        assert sources[child] == await expected(server, header["childConversationId"], view)
        call_id = header["parentCallId"]
        # Its parent's events: the session's own, or (nested) its parent's child events.
        parent = [
            (i, e if e.event != "child" else Sse(e.id, inner(e).get("kind", "full"), inner(e)))
            for i, e in enumerate(events)
            if (e.event != "child" and header["depth"] == 1)
            or e.data.get("childSubmissionId") == header["parentSubmissionId"]
        ]
        positions = [i for i, e in enumerate(events) if e.data.get("childSubmissionId") == child]
        spawned = next(i for i, e in parent if _spawn_of(e, call_id))
        answered = next(i for i, e in parent if _outcome_of(e, call_id))
        assert spawned < min(positions) and max(positions) < answered
    assert {h["depth"] for h in children.values()} == set(range(1, depth + 1))
    ids = [e.id for e in events]
    assert len(set(ids)) == len(ids)


async def _settled(server: Server, body: str = "ask around") -> dict[str, Any]:
    answer = await server.client.post(ME, params={"wait": True}, json={"body": body})
    assert answer.status_code == 200, answer.text
    settled: dict[str, Any] = answer.json()
    return settled


async def test_the_task_events_link_to_the_childs_stream(serve: Serve) -> None:
    agents, settings = team("tides", "moons")
    server: Server = await serve(agents, settings=settings)
    c = server.client
    settled = await _settled(server)
    view = (await c.get(f"/submissions/{settled['submissionId']}")).json()
    urls = {child["submissionId"]: child["streamUrl"] for child in view["children"]}

    canonical = [e.data["content"] for e in await collect(c, view="stream") if e.event == "full"]
    tasks = [c["data"] for c in canonical if c["type"] == "data"]
    spawned = [t for t in tasks if t["kind"] == "task_spawned"]
    finished = [t for t in tasks if t["kind"] == "task_finished"]
    assert [t["callId"] for t in spawned] == [t["callId"] for t in finished] == ["call-0", "call-1"]
    for event in spawned + finished:
        assert event["streamUrl"] == urls[event["childSubmissionId"]]
        assert event["agent"] == "researcher" and event["childConversationId"]
    assert [t["result"] for t in finished] == ["notes on tides", "notes on moons"]
    assert {t["status"] for t in finished} == {"succeeded"}

    records = await collect(c)
    raw = [e.data["payload"] for e in records if e.event == "task_spawned"]
    assert [p["childSubmissionId"] for p in raw] == [t["childSubmissionId"] for t in spawned]
    assert [p["session"] for p in raw] == [t["session"] for t in spawned]
    for child in view["children"]:  # the link serves the child's own stream
        own = await collect(c, child["streamUrl"])
        assert own[0].data["conversationId"] == child["conversationId"]
        assert own[-1].event == "submission_settled"


@pytest.mark.parametrize("view", ["records", "stream"])
async def test_children_resume_at_every_event_cut(serve: Serve, view: str) -> None:
    agents, settings = team("tides", "moons")
    server: Server = await serve(agents, settings=settings)
    c = server.client
    await _settled(server)
    full = await collect(c, view=view, children=True)
    await check_family(server, full, view)
    plain = await collect(c, view=view)
    assert [e.data for e in full if e.event != "child"] == [e.data for e in plain]
    assert [e.id for e in full if e.event != "child"] == [e.id for e in plain]
    for cut in range(1, len(full)):
        last = full[cut - 1].id
        assert last is not None
        resumed = await collect(c, view=view, children=True, last_event_id=last)
        assert full[:cut] + resumed == full, (cut, last)


@pytest.mark.parametrize("view", ["records", "stream"])
async def test_a_live_reader_reconnecting_mid_children_misses_nothing(
    serve: Serve, view: str
) -> None:
    gate = Gate()
    agents, settings = team("tides", "moons", gate=gate)
    server: Server = await serve(agents, settings=settings)
    c = server.client
    accepted = (await c.post(ME, json={"body": "ask around"})).json()
    seen: list[Sse] = []
    holding: set[str] = set()  # children whose hold call the reader has seen
    progress: set[str] = set()  # children whose progress reached the parent's stream
    async with asyncio.timeout(WAIT):
        async for event in sse(c, view=view, children=True):
            if event.id is None:
                assert event.event == "progress"
                progress.add(event.data["submissionId"])
            else:
                seen.append(event)
            if event.event == "child" and "hold" in orjson.dumps(inner(event)).decode():
                holding.add(event.data["childSubmissionId"])
            if len(holding) == 2 and len(progress) == 2:
                break  # the reader drops the connection here, with both children running
    assert holding == progress
    gate.opened.set()
    last = seen[-1].id
    assert last is not None and ";" in last  # the id holds the running children's places
    rest = await collect(c, view=view, children=True, last_event_id=last)
    settlement = await c.get(f"/submissions/{accepted['submissionId']}", params={"wait": True})
    assert settlement.json()["settlement"]["result"] == "Findings: notes on tides | notes on moons"
    await check_family(server, seen + rest, view)


@pytest.mark.parametrize(
    ("view", "last_event_id"),
    [
        ("records", "x"),
        ("records", "5;"),
        ("records", "5;7"),
        ("records", "5;a=3"),
        ("records", "5;7=3:1"),
        ("records", "5;7=0"),
        ("records", "5;7=3;7=4"),
        ("records", ";7=3"),
        ("records", "-1"),
        ("stream", "5"),
        ("stream", "0:0"),
        ("stream", "5:-2"),
        ("stream", "5:0;7=0:0"),
        ("stream", "5:0;7=3"),
        ("stream", "5:0;7..1=3:0"),
        ("stream", "99999999999999999999:0"),
    ],
)
async def test_a_malformed_merged_id_is_a_typed_400(
    asgi: Serve, view: str, last_event_id: str
) -> None:
    agents, settings = team("tides")
    server: Server = await asgi(agents, settings=settings)
    await _settled(server)
    response = await server.client.get(
        ME, params={"view": view, "children": True}, headers={"Last-Event-ID": last_event_id}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_last_event_id"


async def test_a_childs_id_is_refused_by_the_plain_stream(asgi: Serve) -> None:
    agents, settings = team("tides")
    server: Server = await asgi(agents, settings=settings)
    await _settled(server)
    for view, last in (("records", "9;7=1"), ("stream", "9:-1")):
        response = await server.client.get(
            ME, params={"view": view}, headers={"Last-Event-ID": last}
        )
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_last_event_id"


async def test_after_and_a_merged_id_take_the_later_place(serve: Serve) -> None:
    agents, settings = team("tides")
    server: Server = await serve(agents, settings=settings)
    c = server.client
    await _settled(server)
    full = await collect(c, children=True)
    children = [i for i, e in enumerate(full) if e.event == "child"]
    inside = full[children[2]]  # a child's event: its id names the child's place
    assert inside.id is not None
    spawn = int(inside.id.split(";")[0])
    # ?after before the id's place: the id wins; after it: ?after wins, children and all.
    resumed = await collect(c, children=True, after=spawn - 1, last_event_id=inside.id)
    assert resumed == full[children[2] + 1 :]
    later = await collect(c, children=True, after=spawn + 1, last_event_id=inside.id)
    assert later == [e for e in full if e.event != "child" and int(str(e.id)) > spawn + 1]


@pytest.mark.parametrize("view", ["records", "stream"])
async def test_grandchildren_nest_under_their_parents_call(serve: Serve, view: str) -> None:
    agents, settings = nested_team()
    server: Server = await serve(agents, settings=settings)
    c = server.client
    settled = await _settled(server)
    assert settled["result"] == "Findings: Findings: notes on sources"
    full = await collect(c, view=view, children=True)
    await check_family(server, full, view, depth=2)
    headers = {e.data["childSubmissionId"]: e.data for e in full if e.event == "child"}
    [child] = [h for h in headers.values() if h["depth"] == 1]
    [grandchild] = [h for h in headers.values() if h["depth"] == 2]
    assert grandchild["parentSubmissionId"] == child["childSubmissionId"]
    assert grandchild["agent"] == "librarian" and child["agent"] == "researcher"
    for cut in range(1, len(full)):
        resumed = await collect(c, view=view, children=True, last_event_id=full[cut - 1].id)
        assert full[:cut] + resumed == full, cut

    tree = (await c.get(f"/submissions/{settled['submissionId']}/tree")).json()
    [node] = tree["children"]
    [leaf] = node["children"]
    assert (node["agent"], node["depth"], leaf["agent"], leaf["depth"]) == (
        "researcher",
        1,
        "librarian",
        2,
    )
    assert leaf["parentSubmissionId"] == node["submissionId"] == child["childSubmissionId"]
    assert tree["usage"]["calls"] == 2 + node["usage"]["calls"] == 2 + 2 + leaf["usage"]["calls"]
