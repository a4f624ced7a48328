"""Models: the protocol the journal calls, and keyless deterministic models.

Example::

    from tether.models import Rule, ScriptedModel, ToolUse

    model = ScriptedModel([Rule("time", ToolUse("clock"))], default="Hello!")
"""

from tether.models._echo import EchoModel
from tether.models._prices import cost_of
from tether.models._protocol import DeltaSink, Model, StreamDelta
from tether.models._scripted import (
    Delay,
    Failure,
    Reply,
    Rule,
    ScriptedModel,
    Text,
    Thinking,
    ToolUse,
    estimate_tokens,
)

__all__ = (
    "Delay",
    "DeltaSink",
    "EchoModel",
    "Failure",
    "Model",
    "Reply",
    "Rule",
    "ScriptedModel",
    "StreamDelta",
    "Text",
    "Thinking",
    "ToolUse",
    "cost_of",
    "estimate_tokens",
)
