"""The SSE record stream beside a bare Starlette stream of the same bytes.

    python benchmarks/sse.py [--records 20000] [--fanout-records 2000] [--appends 200]

Each server runs in its own process (uvicorn, one worker); this process is the client and
counts frames as they arrive. In the same run it measures, for Tether's
``GET /agents/{agent}/{instance}`` and for a bare Starlette ``StreamingResponse`` that
serves the very same frames from memory (the floor of SSE over HTTP/1.1 here):

- catch-up: records/s delivered to 1 subscriber reading ``--records`` records, and in
  total to 100 subscribers each reading ``--fanout-records``;
- live: p50/p99 milliseconds from an append in the server process to a followed
  subscriber parsing its frame, with 1 and 100 subscribers (the bare server broadcasts
  through an ``asyncio.Condition``; Tether goes through the store and its append
  notifier).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import httpx
import orjson

from benchmarks._measure import scratch
from benchmarks._table import print_table

KEY = ("assistant", "bench", "default")
STREAM = "/agents/assistant/bench"
BODY = "x" * 300


# --- the servers (child processes) ---------------------------------------------------------


async def _prepare(path: Path, records: int) -> None:
    from tether.records import RecordDraft, UserMessage
    from tether.store import SessionKey, SqliteStore

    async with await SqliteStore.open(path) as store:
        conversation, _ = await store.ensure_conversation(
            SessionKey(*KEY), conversation_id="c-bench", created_at=datetime.now(UTC)
        )
        head = await store.head(conversation.id)
        while head < records:
            batch = [RecordDraft(UserMessage(body=BODY)) for _ in range(min(500, records - head))]
            head = (await store.append(conversation.id, batch, expected_seq=head, fence=0))[-1].seq


def _serve_tether(path: Path, port: int) -> None:
    import uvicorn
    from fastapi import FastAPI

    from tether.demo import demo_agents
    from tether.engine import Runtime
    from tether.http import create_app
    from tether.records import RecordDraft, UserMessage

    runtime = Runtime(demo_agents(), f"sqlite:///{path}")
    app: FastAPI = create_app(runtime, manage_runtime=True, worker=False)

    @app.post("/_bench/append")
    async def append() -> dict[str, int]:
        store = runtime.store
        head = await store.head("c-bench")
        draft = RecordDraft(UserMessage(body=repr(time.monotonic())))
        await store.append("c-bench", [draft], expected_seq=head, fence=0)
        return {"head": head + 1}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def _serve_starlette(path: Path, port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    from tether.http._sse import frame
    from tether.store import SqliteStore

    async def load() -> list[bytes]:
        async with await SqliteStore.open(path) as store:
            return [frame(r) for r in await store.read("c-bench", limit=10_000_000)]

    frames = asyncio.run(load())
    appended: list[bytes] = []
    changed = asyncio.Condition()

    async def stream(request: Request) -> StreamingResponse:
        after = int(request.query_params.get("after", 0))
        follow = request.query_params.get("follow") == "true"

        async def body() -> AsyncIterator[bytes]:
            yield b"retry: 2000\n\n"
            for start in range(after, len(frames), 500):
                yield b"".join(frames[start : start + 500])
            sent = max(0, after - len(frames))  # seqs run on from the stored frames
            while follow:
                async with changed:
                    while len(appended) <= sent:
                        await changed.wait()
                fresh, sent = appended[sent:], len(appended)
                yield b"".join(fresh)

        return StreamingResponse(body(), media_type="text/event-stream")

    async def append(request: Request) -> JSONResponse:
        data = orjson.dumps({"kind": "user_message", "payload": {"body": repr(time.monotonic())}})
        async with changed:
            appended.append(b"event: user_message\ndata: %s\n\n" % data)
            changed.notify_all()
        return JSONResponse({"head": len(frames) + len(appended)})

    routes = [Route(STREAM, stream), Route("/_bench/append", append, methods=["POST"])]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


# --- the client (this process) ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(kind: str, path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--path", str(path), "--port", str(port)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return process, url
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"{kind} server did not start")


async def _catch_up(client: httpx.AsyncClient, after: int) -> int:
    frames, tail = 0, b""
    async with client.stream("GET", STREAM, params={"after": after}) as response:
        async for chunk in response.aiter_raw():
            # A marker may straddle two chunks; the kept tail is too short to hold a whole one.
            frames += (tail + chunk).count(b"\ndata: ")
            tail = (tail + chunk)[-6:]
    return frames


async def catch_up_rate(url: str, subscribers: int, total: int, records: int) -> float:
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=_limits(subscribers)) as c:
        start = time.perf_counter()
        counts = await asyncio.gather(*(_catch_up(c, total - records) for _ in range(subscribers)))
        elapsed = time.perf_counter() - start
    assert all(count == records for count in counts), counts
    return sum(counts) / elapsed


def _limits(subscribers: int) -> httpx.Limits:
    return httpx.Limits(max_connections=subscribers + 2, max_keepalive_connections=subscribers + 2)


async def live_latency(url: str, subscribers: int, appends: int) -> tuple[float, float]:
    latencies: list[float] = []
    connected = asyncio.Semaphore(0)

    async def follow(c: httpx.AsyncClient, after: int) -> None:
        params: dict[str, str | int] = {"follow": "true", "after": after}
        async with c.stream("GET", STREAM, params=params) as response:
            seen = 0
            buffer = b""
            async for chunk in response.aiter_raw():
                if chunk.startswith(b"retry:"):
                    connected.release()
                buffer += chunk
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    _, found, data = event.partition(b"data: ")
                    if found:
                        body = orjson.loads(data)["payload"]["body"]
                        latencies.append(time.monotonic() - float(body))
                        seen += 1
                if seen >= appends:
                    return

    async with httpx.AsyncClient(base_url=url, timeout=120, limits=_limits(subscribers)) as c:
        head = (await c.post("/_bench/append", json={})).json()["head"]
        latencies.clear()
        readers = [asyncio.create_task(follow(c, head)) for _ in range(subscribers)]
        for _ in range(subscribers):
            await connected.acquire()
        await asyncio.sleep(0.2)
        for _ in range(appends):
            await c.post("/_bench/append", json={})
            await asyncio.sleep(0.005)
        await asyncio.gather(*readers)
    ordered = sorted(latencies)
    return statistics.median(ordered) * 1e3, ordered[int(len(ordered) * 0.99) - 1] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--fanout-records", type=int, default=2_000)
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--serve", choices=("tether", "starlette"), help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        (_serve_tether if args.serve == "tether" else _serve_starlette)(args.path, args.port)
        return

    rows: list[list[str]] = []
    with scratch() as path:
        asyncio.run(_prepare(path, args.records))
        results: dict[str, list[float]] = {}
        for kind in ("starlette", "tether"):
            process, url = _start(kind, path)
            try:
                n, many = args.subscribers, args.fanout_records
                results[kind] = [
                    asyncio.run(catch_up_rate(url, 1, args.records, args.records)),
                    asyncio.run(catch_up_rate(url, n, args.records, many)),
                    *asyncio.run(live_latency(url, 1, args.appends)),
                    *asyncio.run(live_latency(url, n, args.appends)),
                ]
            finally:
                process.terminate()
                process.wait(10)
    labels = [
        "catch-up, 1 subscriber (records/s)",
        f"catch-up, {args.subscribers} subscribers (records/s, total)",
        "live p50, 1 subscriber (ms)",
        "live p99, 1 subscriber (ms)",
        f"live p50, {args.subscribers} subscribers (ms)",
        f"live p99, {args.subscribers} subscribers (ms)",
    ]
    for index, label in enumerate(labels):
        bare, ours = results["starlette"][index], results["tether"][index]
        fmt = "{:,.0f}" if index < 2 else "{:.2f}"
        ratio = bare / ours if index < 2 else ours / bare
        rows.append([label, fmt.format(bare), fmt.format(ours), f"{ratio:.2f}x"])
    print_table(
        f"SSE stream ({args.records:,} stored records, {args.appends} live appends)",
        ["measure", "bare starlette", "tether", "tether cost"],
        rows,
    )


if __name__ == "__main__":
    main()
