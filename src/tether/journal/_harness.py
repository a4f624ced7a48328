"""What a harness is: the code that drives one execution through its :class:`Turn`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from tether.journal._turn import Turn

__all__ = ("Harness",)


@runtime_checkable
class Harness(Protocol):
    """Drives one execution. It never calls a model or a host tool itself: it asks the turn.

    Example::

        class Echo:
            name, version = "echo", "1"

            async def run(self, turn: Turn) -> JsonValue:
                request = ModelRequest(model="local:echo", messages=(*turn.history, *turn.inputs))
                return (await turn.model(request)).message.text
    """

    name: str
    version: str

    async def run(self, turn: Turn) -> JsonValue: ...
