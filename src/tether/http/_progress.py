"""Tool progress as the streams send it: an SSE event without an ``id:``.

The runtime's :class:`~tether.engine.ProgressHub` hands each ``ToolProgress`` to the streams
following its session; without an ``id:`` ``Last-Event-ID`` keeps naming records: a client
that reconnects resumes at the records and misses only the progress reported while it was
away, which was never meant to last.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from tether.engine import ToolProgress

__all__ = ("progress_frames",)


def progress_frames(events: Iterable[ToolProgress]) -> bytes:
    """Each as ``event: progress`` with the ids a client needs to place it, and no ``id:``."""
    return b"".join(
        b"event: progress\ndata: %s\n\n"
        % orjson.dumps(
            {
                "type": "tool_progress",
                "conversationId": event.correlation.conversation_id,
                "submissionId": event.correlation.submission_id,
                "callId": event.call_id,
                "text": event.text,
            }
        )
        for event in events
    )
