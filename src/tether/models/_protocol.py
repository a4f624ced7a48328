"""The model protocol: how the journal asks a model for a completion."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from tether.messages import ModelRequest, ModelResponse

__all__ = ("DeltaSink", "Model", "StreamDelta")


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """A chunk of a streaming completion: text or thinking. ``summary``: the thinking is a
    summary of the model's reasoning (OpenAI's reasoning summaries), not the reasoning."""

    kind: Literal["text", "thinking"]
    text: str
    summary: bool = False


DeltaSink = Callable[[StreamDelta], Awaitable[None]]


@runtime_checkable
class Model(Protocol):
    """A model client. ``request`` returns the whole response; a streaming client also
    passes chunks to ``stream`` as they arrive (the response is still the whole message).

    Example::

        class Echo:
            async def request(self, request, stream=None):
                text = request.messages[-1].text
                if stream is not None:
                    await stream(StreamDelta("text", text))
                return ModelResponse(message=Message.assistant(text))
    """

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse: ...
