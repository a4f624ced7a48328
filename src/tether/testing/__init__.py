"""Test support shipped with Tether: a deliberately nondeterministic model, a recording tool
executor, log copying for crash simulation, failpoints (:func:`failpoints`, docs/testing.md),
recorded sessions replayed as regression tests (:func:`assert_replays`), and the store
conformance suite (:mod:`.storetest`). The scripted model itself is
:class:`tether.models.ScriptedModel`."""

from typing import Any

from tether._moved import moved
from tether.testing._failpoints import Failpoints, failpoints
from tether.testing._logs import copy_prefix
from tether.testing._models import CountingModel, tool_call_response
from tether.testing._replay import (
    ReplayDivergence,
    ReplayReport,
    assert_replays,
    read_log,
    replay_log,
)
from tether.testing._tools import RecordingTools

__all__ = (
    "CountingModel",
    "Failpoints",
    "RecordingTools",
    "ReplayDivergence",
    "ReplayReport",
    "assert_replays",
    "copy_prefix",
    "failpoints",
    "read_log",
    "replay_log",
    "tool_call_response",
)

# Deprecated paths: the name's one home is its package; these still import, with a warning.
_MOVED = {"ScriptedModel": "tether.models"}


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)
