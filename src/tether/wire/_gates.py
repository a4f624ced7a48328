"""What the inputs and budget gates routes answer: a page of questions runs asked, a page of
runs parked on their budget, and the record an answer or a decision wrote."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from tether.wire._base import TIMESTAMP, WireResponse, optional
from tether.wire._logged import WireActor, WireRecord

__all__ = (
    "AnswerReceipt",
    "BudgetGateItem",
    "BudgetGatesPage",
    "BudgetReceipt",
    "BudgetStatus",
    "InputItem",
    "InputStatus",
    "InputsPage",
)


InputStatus = Literal["pending", "answered", "closed"]


class InputItem(WireResponse):
    """An input as ``GET /inputs`` lists it: the question (its prompt and the schema its
    answer must fit), where it stands, and once answered the answer, who gave it and when,
    or the time it was closed (its submission settled unanswered). ``responder`` is the name
    the answer is shown under; ``decidedBy`` who gave it, as the server verified them."""

    input_id: str
    conversation_id: str
    seq: int = Field(description="The seq of the input_requested record.")
    agent: str
    instance: str
    session: str
    submission_id: str | None = optional()
    execution_id: str | None = optional()
    call_id: str
    tool: str = Field(description="What asked: ``ask`` (``Turn.ask``), ``interrupt``, a tool.")
    args: dict[str, JsonValue]
    prompt: str
    answer_schema: dict[str, JsonValue] | None = optional(
        alias="schema", description="The JSON Schema the answer must fit; absent: any value."
    )
    requested_at: str | None = optional(**TIMESTAMP)
    status: InputStatus
    answer: JsonValue = Field(
        default=None,
        description="The value given: present once answered (it may be ``null``), absent before.",
    )
    responder: str | None = optional(description="Who answered, as the answer names them.")
    answered_at: str | None = optional(**TIMESTAMP)
    closed_at: str | None = optional(**TIMESTAMP)
    decided_by: WireActor | None = optional(
        description="Who answered, as the server verified them (their subject and tenant, and "
        "the name shown): absent when no one authenticated did."
    )
    metadata: dict[str, JsonValue] | None = optional(
        description="What the framework attached to the request (pydantic-ai's "
        "``ApprovalRequired``/``CallDeferred`` metadata); absent when nothing was."
    )

    @model_serializer(mode="wrap")
    def _answer_once_answered(self, write: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A null answer is an answer: ``answer`` is kept by the status, not by its value.
        body: dict[str, Any] = write(self)
        if self.status != "answered":
            body.pop("answer", None)
        return body


class InputsPage(WireResponse):
    inputs: list[InputItem]
    next_cursor: str | None = Field(
        description="The ``cursor`` of the next page; null on the last page."
    )


class AnswerReceipt(WireResponse):
    input_id: str
    answer: WireRecord = Field(description="The input_answered record.")


BudgetStatus = Literal["pending", "decided", "closed"]


class BudgetGateItem(WireResponse):
    """A run parked on its budget, as ``GET /budgets`` lists it: the limit it used up
    (``limit``, ``used`` of ``max``), what it had spent on every limit (``spent``) and the
    budget in force (``budget``); once decided, the decision, the extension an approval
    granted, who decided and when; or when it closed (its submission settled undecided)."""

    gate_id: str
    conversation_id: str
    seq: int = Field(description="The seq of the budget_requested record.")
    agent: str
    instance: str
    session: str
    submission_id: str | None = optional()
    limit: str = Field(description="modelCalls, tokens, costUsd, toolCalls or wallTime.")
    used: float
    max: float
    spent: dict[str, JsonValue] = Field(
        description="What the submission had spent, by limit (costUsd null when unknown, "
        "wallTime in seconds)."
    )
    budget: dict[str, JsonValue] = Field(description="The budget in force when it ran out.")
    scope: Literal["submission", "session", "tenant"] = Field(
        description="Whose budget ran out: the submission's own, its session's (every "
        "submission of the session together), or its tenant's of a day or month (every run "
        "of the tenant together)."
    )
    requested_at: str | None = optional(**TIMESTAMP)
    status: BudgetStatus
    decision: Literal["approve", "reject"] | None = optional()
    extension: dict[str, JsonValue] | None = optional(
        description="What an approval added to each limit."
    )
    reason: str | None = optional()
    approver: str | None = optional(description="Who decided, as the decision names them.")
    decided_at: str | None = optional(**TIMESTAMP)
    closed_at: str | None = optional(**TIMESTAMP)
    decided_by: WireActor | None = optional(
        description="Who decided, as the server verified them: absent when no one "
        "authenticated did."
    )


class BudgetGatesPage(WireResponse):
    budgets: list[BudgetGateItem]
    next_cursor: str | None = Field(
        description="The ``cursor`` of the next page; null on the last page."
    )


class BudgetReceipt(WireResponse):
    gate_id: str
    decision: WireRecord = Field(description="The budget_decided record.")
