"""What kind of message a dispatch carries (:data:`InboundKind`) and a signal's own fields
(:class:`SignalInfo`), as the wire and the engine share them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tether._wire import WireModel

__all__ = ("InboundKind", "SignalInfo")

InboundKind = Literal["user", "signal", "steer", "follow_up", "compact"]


class SignalInfo(WireModel):
    type: str = Field(min_length=1, max_length=200)
    sender: dict[str, str] | None = None
    tag: str | None = None
