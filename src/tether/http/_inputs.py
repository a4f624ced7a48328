"""The inputs a run waits for: ``GET /inputs`` pages them, ``POST /inputs/{id}`` answers one.

An input is a gate of kind ``input`` (``Turn.ask``): the same index, cursors and
resumption as an approval, with a value for its answer instead of a decision.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query

from tether.errors import InputNotFound
from tether.http._access import AccessDependency, actor_of, own_gate, shown_name
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import BODY_FAILURES, failures
from tether.http._gate_pages import GatePageDependency
from tether.http._input_views import input_item
from tether.store import GateKind
from tether.wire import AnswerBody, AnswerReceipt, InputsPage

__all__ = ("inputs_router",)


inputs_router = APIRouter(tags=["inputs"])
"""The inputs page and an answer."""


@inputs_router.get("/inputs", responses=failures(422, 503))
async def inputs(
    runtime: RuntimeDependency,
    query: GatePageDependency,
    status: Literal["pending", "answered", "closed", "all"] = Query(
        default="pending",
        description="pending (waits for an answer), answered (the answers given, who "
        "gave them and when), closed (settled unanswered) or all.",
    ),
) -> InputsPage:
    """A page of the inputs runs asked for, oldest request first."""
    page = await query.read(runtime, GateKind.INPUT, status)
    return InputsPage(
        inputs=[input_item(gate) for gate in page.gates], next_cursor=page.next_cursor
    )


@inputs_router.post("/inputs/{input_id}", responses=failures(*BODY_FAILURES, 404, 409, 503))
async def answer(
    runtime: RuntimeDependency,
    access: AccessDependency,
    input_id: str,
    payload: AnswerBody,
) -> AnswerReceipt:
    """Answer a run's question with a JSON value (checked against the input's schema:
    422 ``invalid_answer`` if it does not fit, and nothing is written); the run resumes
    with it. The same answer again answers the same record; another is a 409. The answer
    records who gave it (the request's identity; ``responder`` is the name shown)."""
    identity = access.identity
    await own_gate(runtime, access, input_id, InputNotFound(input_id))
    by = actor_of(identity)
    record = await runtime.answer(
        input_id,
        payload.value,
        responder=shown_name(payload, "responder", identity, by),
        by=by,
    )
    return AnswerReceipt(input_id=input_id, answer=record)
