"""``@tool``: schemas from type hints, contexts, and failures returned to the model."""

from collections.abc import Awaitable, Callable

import pytest
from pydantic import BaseModel, JsonValue

from tether.agent import Tool, Toolbox, ToolContext, tool
from tether.journal import ToolFailure, ToolScope
from tether.messages import Mediation, ToolCall, ToolOutcomeStatus


class Address(BaseModel):
    city: str
    zip: str | None = None


@tool
def add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b


@tool(requires_approval=True, idempotent=True, name="ship")
async def ship_to(address: Address, ctx: ToolContext) -> dict[str, str]:
    """Ship to an address."""
    return {"to": address.city, "key": ctx.idempotency_key}


@tool
async def broken() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


@tool
async def weird() -> object:
    """Returns something that is not JSON."""
    return object()


async def _step(name: str, fn: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
    return "stepped"


def scope(key: str = "k-1") -> ToolScope:
    return ToolScope(
        conversation_id="c", session="s", execution_id="e", idempotency_key=key, step=_step
    )


def test_schemas_come_from_type_hints() -> None:
    spec = add.spec
    assert spec.name == "add" and spec.description == "Add two numbers."
    assert spec.parameters["required"] == ["a"]
    properties = spec.parameters["properties"]
    assert isinstance(properties, dict) and properties["b"] == {
        "default": 2,
        "title": "B",
        "type": "integer",
    }
    ship = ship_to.spec
    assert ship.name == "ship" and ship.mediation is Mediation.APPROVAL and ship.idempotent
    assert "ctx" not in ship.parameters["properties"]  # type: ignore[operator]
    assert "$defs" in ship.parameters


@pytest.mark.parametrize(
    ("call", "status", "needle"),
    [
        (
            ToolCall(call_id="1", name="add", args={"a": 1}, idempotency_key="k"),
            ToolOutcomeStatus.OK,
            "3",
        ),
        (
            ToolCall(call_id="2", name="add", args={"a": "x"}, idempotency_key="k"),
            ToolOutcomeStatus.ERROR,
            "invalid arguments",
        ),
        (
            ToolCall(call_id="3", name="add", args={"a": 1, "c": 2}, idempotency_key="k"),
            ToolOutcomeStatus.ERROR,
            "c:",
        ),
        (
            ToolCall(call_id="4", name="nope", idempotency_key="k"),
            ToolOutcomeStatus.ERROR,
            "unknown tool",
        ),
        (
            ToolCall(call_id="6", name="weird", idempotency_key="k"),
            ToolOutcomeStatus.ERROR,
            "not JSON",
        ),
        (
            ToolCall(
                call_id="7", name="ship", args={"address": {"city": "Oslo"}}, idempotency_key="k"
            ),
            ToolOutcomeStatus.OK,
            "Oslo",
        ),
    ],
)
async def test_a_call_that_cannot_run_is_a_result_for_the_model(
    call: ToolCall, status: ToolOutcomeStatus, needle: str
) -> None:
    tools: list[Tool] = [add, ship_to, broken, weird]
    result = await Toolbox(tools).execute(call, scope())
    assert result.status is status and needle in result.content and result.call_id == call.call_id
    assert result.is_error == (status is ToolOutcomeStatus.ERROR)


async def test_a_tool_that_raised_is_a_failure_for_the_journal_to_retry_or_report() -> None:
    call = ToolCall(call_id="5", name="broken", idempotency_key="k")
    with pytest.raises(ToolFailure) as failed:
        await Toolbox([broken]).execute(call, scope())
    assert failed.value.message == "broken failed: RuntimeError: disk on fire"
    assert isinstance(failed.value.__cause__, RuntimeError)  # what a policy's retry_on sees


async def test_the_context_carries_the_key_and_steps() -> None:
    @tool
    async def stepper(ctx: ToolContext) -> JsonValue:
        """Uses a step."""
        return [ctx.idempotency_key, await ctx.step("s", _value)]

    result = await Toolbox([stepper]).execute(
        ToolCall(call_id="1", name="stepper", idempotency_key="key-9"), scope("key-9")
    )
    assert result.data == ["key-9", "stepped"]


async def _value() -> JsonValue:
    return "unused"


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        Toolbox([add, add])
