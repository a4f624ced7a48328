"""Test support shipped with Tether: deterministic models, a recording tool executor, log
copying for crash simulation, and the store conformance suite (:mod:`.storetest`)."""

from tether.testing._logs import copy_prefix
from tether.testing._models import CountingModel, ScriptedModel, tool_call_response
from tether.testing._tools import RecordingTools

__all__ = ("CountingModel", "RecordingTools", "ScriptedModel", "copy_prefix", "tool_call_response")
