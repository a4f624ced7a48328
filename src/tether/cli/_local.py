"""The commands that work on a store directly (``records``, ``spans``, ``verify``, ``replay``,
``fork``): none of them creates a store, and each fails in one line."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
import typer
from rich.console import Console

from tether.cli._exit import ExitCode, fail
from tether.cli._stores import open_store_or_fail
from tether.errors import LogTampered, TetherError

if TYPE_CHECKING:
    from tether.engine import AgentDefinition
    from tether.records import Record
    from tether.store import Store
    from tether.stream import CloseSpan, OpenSpan

__all__ = ("fork", "records", "replay", "spans", "verify")

T = TypeVar("T")


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coroutine)
    except LogTampered as exc:
        fail(f"broken at seq {exc.seq}: {exc.reason}")
    except TetherError as exc:
        fail(f"{exc.code}: {exc}")


async def _each_record(store: Store, conversation: str) -> AsyncIterator[Record]:
    after = 0
    while page := await store.read(conversation, after_seq=after, limit=1000):
        for record in page:
            yield record
        after = page[-1].seq


def records(conversation: str, store_url: str) -> None:
    async def run() -> None:
        async with await open_store_or_fail(store_url, create=False) as store:
            async for record in _each_record(store, conversation):
                typer.echo(record.to_json().decode())

    _run(run())


def spans(conversation: str, store_url: str) -> None:
    from tether.stream import SpanDeriver, StreamProjector

    async def run() -> None:
        projector, deriver = StreamProjector(), SpanDeriver()
        async with await open_store_or_fail(store_url, create=False) as store:
            async for record in _each_record(store, conversation):
                for event in projector.feed(record):
                    for signal in deriver.observe(event):
                        _print_signal(record.seq, signal)
        for signal in deriver.flush():
            _print_signal(None, signal)

    _run(run())


def _print_signal(seq: int | None, signal: OpenSpan | CloseSpan) -> None:
    from tether.stream import OpenSpan

    kind = "open" if isinstance(signal, OpenSpan) else "close"
    line = {"signal": kind, "seq": seq, **dataclasses.asdict(signal)}
    typer.echo(orjson.dumps(line).decode())


def verify(conversation: str, store_url: str, console: Console) -> None:
    async def run() -> tuple[int, int]:
        async with await open_store_or_fail(store_url, create=False) as store:
            head = await store.verify(conversation)
            first = await store.read(conversation, limit=1)
            return (first[0].seq if first else 1), head

    first, head = _run(run())
    if first == 1:
        console.print(f"ok: {head} records verified")
    else:  # its head was cut by retention: the chain is verified from the anchor on
        console.print(
            f"ok: records {first}..{head} verified (1..{first} replaced by a log_truncated record)"
        )


def replay(
    conversation: str, store_url: str, agents: Mapping[str, AgentDefinition], console: Console
) -> None:
    from tether.engine import build_spec
    from tether.journal import NOT_MINTED, Journal

    async def run() -> list[Any]:
        async with await open_store_or_fail(store_url, create=False) as store:
            found = await store.get_conversation(conversation)
            definition = agents.get(found.key.agent)
            if definition is None:
                fail(f"agent {found.key.agent!r} is not in the given agents", ExitCode.BAD_APP)
            spec = await build_spec(definition, found.key.agent, found.key.instance, {})
            # No model, no tools: a replay serves what was recorded.
            journal = await Journal.open(store, conversation, fence=NOT_MINTED)
            return await journal.replay(spec.harness)

    outputs = _run(run())
    for output in outputs:
        console.print(output if isinstance(output, str) else json.dumps(output))
    console.print(f"replayed {len(outputs)} executions; model and tool invocations: 0")


def fork(conversation: str, at: int, store_url: str, console: Console) -> None:
    from tether.engine import Runtime

    async def run() -> str:
        async with await open_store_or_fail(store_url, create=False) as store:
            runtime = Runtime({}, store)
            await runtime.start(worker=False)
            try:
                child = await runtime.fork(conversation, at_seq=at)
            finally:
                await runtime.close()
            repaired = ", ".join(child.repaired_calls)
            note = (
                f"\nrecord {at} falls between a tool call and its result: the fork gave "
                f"{repaired} an interrupted result, as recovery would"
                if repaired
                else ""
            )
            return f"{child.id} ({child.key}){note}"

    console.print(f"forked: {_run(run())}")
