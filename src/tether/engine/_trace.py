"""The W3C trace context a dispatch may carry (https://www.w3.org/TR/trace-context/)."""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ("trace_context",)

_TRACEPARENT = re.compile(
    r"^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$"
)
_TRACESTATE_LIMIT = 512


def trace_context(carrier: Mapping[str, str] | None) -> dict[str, str] | None:
    """The valid ``traceparent`` (and its ``tracestate``) of ``carrier``, or ``None``.

    As the specification asks, a malformed context is ignored rather than refused: tracing
    must never fail a dispatch.

    Example::

        trace_context({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
    """
    if not carrier:
        return None
    parent = carrier.get("traceparent", "").strip().lower()
    if not _TRACEPARENT.match(parent):
        return None
    context = {"traceparent": parent}
    state = carrier.get("tracestate", "").strip()
    if state and len(state) <= _TRACESTATE_LIMIT:
        context["tracestate"] = state
    return context
