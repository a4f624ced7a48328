"""The Python examples of a docs page, run as they are written (issue 36 item 3).

The tests read the examples from the page itself, so a page and its tests cannot drift apart.
A test names the example it runs by a phrase only that example holds
(``page.example("def build(model, tools):")``), and each page's test module checks that every
example of the page is named by one of its tests (``page.unclaimed(...)``).
:func:`run_example` runs an example in a namespace as the asyncio REPL would (top-level
``await`` and ``async for`` allowed), so the examples of a page build on one another, as a
reader's session does; the namespace also gives what the page leaves to the reader (its
``shop``, ``send``, ``my_tracer``). A ``pycon`` example is a session of ``>>>`` statements,
each with the output it shows (:func:`pycon_session`).
"""

import ast
import inspect
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.engine import AgentDefinition, Runtime
from tether.store import Store
from tether.stream import (
    SpanSignal,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextDelta,
)

from ..engine.test_runtime import settle
from ..fakes.openai_server import Answer, Call, FakeOpenAI
from .approvals import decide_parked

__all__ = (
    "LOOKUP",
    "Example",
    "Page",
    "Shop",
    "TapReader",
    "memory_only",
    "pycon_session",
    "run_example",
    "serve_the_shop",
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
_FENCED = re.compile(r"^```(python|pycon)\n(.*?)^```$", re.MULTILINE | re.DOTALL)

memory_only = pytest.mark.parametrize("store", ["memory"], indirect=True)
"""For an example whose test adds nothing a store does: the reference store only (a page's
durable adapter example runs on every store)."""


@dataclass(frozen=True)
class Example:
    language: str
    """``python`` or ``pycon``."""
    code: str


class Page:
    """The fenced ``python`` and ``pycon`` examples of ``docs/<name>``, in page order."""

    def __init__(self, name: str) -> None:
        self.name = name
        text = (DOCS / name).read_text()
        self.examples = [Example(language, code) for language, code in _FENCED.findall(text)]

    def example(self, phrase: str) -> str:
        """The code of the one example that holds ``phrase``."""
        found = [e.code for e in self.examples if phrase in e.code]
        assert len(found) == 1, f"{self.name}: {len(found)} examples hold {phrase!r}"
        return found[0]

    def unclaimed(self, phrases: Collection[str]) -> list[str]:
        """The examples none of ``phrases`` names (each should be some test's)."""
        return [e.code for e in self.examples if not any(p in e.code for p in phrases)]


async def run_example(code: str, namespace: dict[str, Any], name: str = "example") -> None:
    """Run ``code`` in ``namespace``, awaiting it if it awaits at its top level."""
    namespace.setdefault("__name__", name)  # what a class or a function defined there reports
    compiled = compile(code, f"<{name}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    outcome = eval(compiled, namespace)  # an example's code, which the test means to run
    if compiled.co_flags & inspect.CO_COROUTINE:
        await outcome


def pycon_session(code: str) -> list[tuple[str, str]]:
    """A ``pycon`` example's statements (``>>>`` and ``...`` lines), each with the output it
    shows."""
    session: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith(">>> "):
            session.append((line[4:], []))
        elif line.startswith("... ") and session:
            session[-1] = (f"{session[-1][0]}\n{line[4:]}", session[-1][1])
        elif session:
            session[-1][1].append(line)
    return [(source, "\n".join(output)) for source, output in session]


class TapReader:
    """What a tap example leaves to the reader: ``send`` (the events) and ``my_tracer`` (the
    span signals), kept for the test to read."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self.signals: list[SpanSignal] = []

    async def send(self, event: StreamEvent) -> None:
        self.events.append(event)

    def my_tracer(self, signal: SpanSignal) -> None:
        self.signals.append(signal)

    def names(self) -> dict[str, Any]:
        return {"send": self.send, "my_tracer": self.my_tracer}

    def text(self) -> str:
        """The text the events streamed."""
        deltas = [e.delta for e in self.events if isinstance(e, StreamTaskMessageDelta)]
        return "".join(d.text_delta or "" for d in deltas if isinstance(d, TextDelta))

    def contents(self, *, whole_only: bool = False) -> list[str]:
        """The content types of the slots the events opened (or sent whole), in order."""
        kinds = (
            StreamTaskMessageFull if whole_only else StreamTaskMessageStart | StreamTaskMessageFull
        )
        return [e.content.type for e in self.events if isinstance(e, kinds)]


class Shop:
    """What the pydantic-ai and OpenAI Agents adapter examples leave to the reader: the shop
    their tools ask and refund from."""

    def __init__(self) -> None:
        self.refunds: list[tuple[str, float]] = []

    async def status(self, order_id: str) -> str:
        return f"order {order_id} shipped"

    async def refund(self, order_id: str, amount: float) -> str:
        self.refunds.append((order_id, amount))
        return f"refunded {amount} on order {order_id}"


LOOKUP = (Answer(calls=(Call("lookup", {"order_id": "42"}),)), Answer(text="Order 42 shipped."))
"""The shop's model, asked where order 42 is: a lookup, then the answer."""
REFUND = {"order_id": "42", "amount": 5.0}


async def serve_the_shop(
    make_runtime: Callable[..., Runtime],
    store: Store,
    fake: FakeOpenAI,
    agents: dict[str, AgentDefinition],
    shop: Shop,
) -> str:
    """The pydantic-ai and OpenAI Agents adapter examples' ``support`` agent (on the Responses
    API), asked where order 42 is, then to refund it, the refund approved: the session's
    conversation id once both settled."""
    fake.add(*LOOKUP, Answer(calls=(Call("refund", REFUND),)), Answer(text="Refunded."))
    async with make_runtime(agents) as runtime:
        first = await runtime.dispatch("support", "acme", "where is order 42?")
        assert (await settle(runtime, first.submission_id))["result"] == "Order 42 shipped."
        second = await runtime.dispatch("support", "acme", "refund 5 on order 42")
        args, refunded = await decide_parked(runtime, store, second, "approve", None)
        records = await runtime.records(first.conversation_id)
    assert (args, refunded, shop.refunds) == (REFUND, "Refunded.", [("42", 5.0)])
    assert fake.count == 4 and {r.path for r in fake.requests} == {"/v1/responses"}
    kinds = [r.kind for r in records]
    assert kinds.count("model_called") == 4 and kinds.count("approval_decided") == 1
    return first.conversation_id
