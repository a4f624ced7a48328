"""Tools for the built-in agent: ``@tool`` derives a JSON Schema from a function's type hints."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, create_model

from tether.journal import ToolPolicy, ToolScope
from tether.messages import Mediation, ToolSpec
from tether.records import Actor

__all__ = ("Tool", "ToolArgumentsError", "ToolContext", "tool")


class ToolArgumentsError(ValueError):
    """The model called a tool with arguments that do not fit its schema."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a running tool may use besides its arguments.

    ``step(name, fn)`` runs ``fn`` once and journals its value (served again on recovery);
    ``progress(text)`` streams partial output to observers (ephemeral, never journaled);
    ``identity`` is who asked, as the server verified them (``None``: no one signed in),
    so a tool can act on their behalf::

        @tool
        async def my_orders(ctx: ToolContext) -> list[str]:
            return await orders.of(ctx.identity.subject) if ctx.identity else []
    """

    call_id: str
    idempotency_key: str
    conversation_id: str
    session: str
    execution_id: str
    scope: ToolScope
    progress_sink: Callable[[str], Awaitable[None]] | None = None
    identity: Actor | None = None

    async def step(self, name: str, fn: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
        return await self.scope.step(name, fn)

    async def progress(self, text: str) -> None:
        if self.progress_sink is not None:
            await self.progress_sink(text)

    async def sleep(self, until: datetime | timedelta) -> None:
        """Sleep durably until a time (timezone-aware) or for a while: the run parks
        without a lease and is woken by the engine then (docs/timers.md). Declare the tool
        idempotent: it is run again once it wakes, its steps and this sleep served from the
        log (so a while counts from the first run)."""
        if self.scope.sleep is None:
            raise RuntimeError("this tool's executor offers no durable sleep")
        await self.scope.sleep(until)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)


@dataclass(frozen=True)
class Tool:
    """A function the model may call. Build one with :func:`tool`."""

    name: str
    description: str
    fn: Callable[..., Any]
    arguments: type[BaseModel]
    context_parameter: str | None = None
    requires_approval: bool = False
    idempotent: bool = False
    policy: ToolPolicy | None = None
    """How each call is bounded and retried (``None``: the agent's ``tool_policies``)."""

    @functools.cached_property
    def spec(self) -> ToolSpec:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=schema,
            mediation=Mediation.APPROVAL if self.requires_approval else Mediation.HOST,
            idempotent=self.idempotent,
        )

    def parse(self, args: dict[str, JsonValue]) -> dict[str, Any]:
        try:
            parsed = self.arguments.model_validate(args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}"
                for error in exc.errors()
            )
            raise ToolArgumentsError(f"invalid arguments for {self.name}: {problems}") from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    async def call(self, args: dict[str, JsonValue], context: ToolContext) -> Any:
        kwargs = self.parse(args)
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = context
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        return await _to_thread(self.fn, kwargs)


async def _to_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    import asyncio

    return await asyncio.to_thread(lambda: fn(**kwargs))


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    requires_approval: bool = False,
    idempotent: bool = False,
    policy: ToolPolicy | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    requires_approval: bool = False,
    idempotent: bool = False,
    policy: ToolPolicy | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a sync or async function; its docstring is the description.

    Parameters become the JSON Schema (pydantic types and models work); one annotated
    :class:`ToolContext` receives the context instead. ``policy`` bounds each call and
    retries a failed one (:class:`~tether.journal.ToolPolicy`).

    Example::

        @tool(idempotent=True, policy=ToolPolicy(timeout=10, retries=2))
        async def weather(city: str, ctx: ToolContext) -> str:
            '''The weather in a city.'''
            return await ctx.step("fetch", lambda: fetch_weather(city))
    """

    def build(function: Callable[..., Any]) -> Tool:
        hints = get_type_hints(function)
        fields: dict[str, Any] = {}
        context_parameter = None
        for parameter in inspect.signature(function).parameters.values():
            annotation = hints.get(parameter.name, Any)
            if annotation is ToolContext:
                context_parameter = parameter.name
                continue
            default = ... if parameter.default is inspect.Parameter.empty else parameter.default
            fields[parameter.name] = (annotation, default)
        tool_name = name or function.__name__
        arguments = create_model(f"{tool_name}_arguments", __base__=_Args, **fields)
        return Tool(
            name=tool_name,
            description=inspect.cleandoc(function.__doc__ or ""),
            fn=function,
            arguments=arguments,
            context_parameter=context_parameter,
            requires_approval=requires_approval,
            idempotent=idempotent,
            policy=policy,
        )

    return build(fn) if fn is not None else build
