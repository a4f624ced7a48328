"""A model call's streamed chunks: handed to the observer as they come, batched into delta
records, and closed by an interrupted completion if the stream is cut."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from tether.errors import TetherError
from tether.journal._effects import JournalObserver
from tether.journal._log import logger
from tether.messages import Message, TextPart, ThinkingPart
from tether.models import StreamDelta
from tether.records import (
    AssistantMessageCompleted,
    AssistantMessageStarted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    Payload,
)

__all__ = ("FLUSH_BYTES", "FLUSH_SECONDS", "DeltaStream", "interrupted_completion")

FLUSH_BYTES = 1024
FLUSH_SECONDS = 0.2


class DeltaStream:
    """Streams chunks to the observer and batches them into delta records.

    Delta records are flushed at 1 KiB or 200 ms and ride with the completion otherwise;
    they are never effects. A stream cut by an error is closed by an interrupted
    completion, which is not an effect either, so the model call stays unanswered.
    """

    def __init__(
        self,
        call_id: str,
        model: str,
        execution_id: str,
        observer: JournalObserver | None,
        write: Callable[..., Awaitable[None]],
        touch: Callable[[], None] | None = None,
    ) -> None:
        self._execution_id = execution_id
        self._touch = touch
        """Told of every chunk: a model call's timeout counts again from it."""
        self._observer = observer
        self._write = write
        """Appends under the turn's lock: ``write(payloads, closing=False)``; a closing
        write goes ahead past a sticky failure (its records are not effects)."""
        self._call_id = call_id
        self._model = model
        self._pending: list[Payload] = []
        self._started = False
        self._size = 0
        self._first_at = 0.0
        self._text: dict[str, list[str]] = {"text": [], "thinking": []}

    async def on_delta(self, delta: StreamDelta) -> None:
        if self._touch is not None:
            self._touch()
        if not delta.text:
            return
        observer = self._observer
        if observer is not None:
            try:
                await observer.on_delta(self._execution_id, self._call_id, delta)
            except Exception:
                logger.exception("journal observer failed on_delta")
        if not self._started:
            self._started = True
            self._pending.append(AssistantMessageStarted(call_id=self._call_id, model=self._model))
        self._text[delta.kind].append(delta.text)
        last = self._pending[-1] if self._pending else None
        if delta.kind == "text":
            if isinstance(last, AssistantTextDelta):
                self._pending[-1] = AssistantTextDelta(
                    call_id=self._call_id, text=last.text + delta.text
                )
            else:
                self._pending.append(AssistantTextDelta(call_id=self._call_id, text=delta.text))
        else:
            summary = delta.summary or None
            if isinstance(last, AssistantThinkingDelta) and last.summary == summary:
                text = last.text + delta.text
            else:
                text = delta.text
                last = None
            thinking = AssistantThinkingDelta(call_id=self._call_id, text=text, summary=summary)
            if last is None:
                self._pending.append(thinking)
            else:
                self._pending[-1] = thinking
        if self._size == 0:
            self._first_at = time.monotonic()
        self._size += len(delta.text)
        if self._size >= FLUSH_BYTES or time.monotonic() - self._first_at >= FLUSH_SECONDS:
            await self._write(self.take(), closing=False)

    def take(self) -> list[Payload]:
        pending, self._pending, self._size = self._pending, [], 0
        return pending

    async def close_interrupted(self) -> None:
        """Write the unanswered intent (held behind) and, if it streamed, close its stream."""
        closing = [interrupted_completion(self._call_id, self._text)] if self._started else []
        try:
            await self._write([*self.take(), *closing], closing=True)
        except TetherError:
            logger.warning("could not close the interrupted call %s", self._call_id)


def interrupted_completion(
    call_id: str, streamed: dict[str, list[str]]
) -> AssistantMessageCompleted:
    """Closes a stream that was cut: the partial message, marked interrupted (not an effect)."""
    thinking = "".join(streamed.get("thinking", ()))
    parts = (
        *((ThinkingPart(text=thinking),) if thinking else ()),
        TextPart(text="".join(streamed.get("text", ()))),
    )
    return AssistantMessageCompleted(
        call_id=call_id, message=Message(role="assistant", parts=parts), interrupted=True
    )
