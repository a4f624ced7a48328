"""Guardrails under a durable run: before the agent's model call, one at a time.

The SDK runs input guardrails beside the agent's first model call and all guardrails of a
list concurrently. A guardrail that asks a checker agent makes model calls of its own, which
the journal records in the order they start: concurrent, that order would depend on timing,
and a resume or a replay could find the calls in another order (or a model call the SDK
cancelled when a tripwire fired). So each guardrail takes the scope's lock before it runs
(the SDK starts them in list order, and the lock is first-come first-served), and input
guardrails block the model call (``run_in_parallel=False``): the log's order is the list's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

from agents import InputGuardrail, OutputGuardrail

__all__ = ("serial_input", "serial_output")

_SERIAL = "_tether_serial"


def _serial_function(function: Callable[..., Any], lock: asyncio.Lock) -> Callable[..., Any]:
    if getattr(function, _SERIAL, None) is lock:
        return function

    @functools.wraps(function)
    async def serial(*args: Any) -> Any:
        async with lock:
            output = function(*args)
            if inspect.isawaitable(output):
                output = await output
            return output

    setattr(serial, _SERIAL, lock)
    return serial


def serial_input(guardrail: InputGuardrail[Any], lock: asyncio.Lock) -> InputGuardrail[Any]:
    """A copy of ``guardrail`` that runs before the model call, after the ones before it."""
    return dataclasses.replace(
        guardrail,
        guardrail_function=_serial_function(guardrail.guardrail_function, lock),
        name=guardrail.get_name(),
        run_in_parallel=False,
    )


def serial_output(guardrail: OutputGuardrail[Any], lock: asyncio.Lock) -> OutputGuardrail[Any]:
    """A copy of ``guardrail`` that runs after the ones before it."""
    return dataclasses.replace(
        guardrail,
        guardrail_function=_serial_function(guardrail.guardrail_function, lock),
        name=guardrail.get_name(),
    )
