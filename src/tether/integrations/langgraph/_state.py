"""A graph's state between submissions: the log keeps its channels; LangGraph's checkpoint is
scratch for one execution.

An execution ends by noting the graph's channels other than ``messages`` (the transcript is
the log's own) under :data:`STATE_STEP` (``Turn.note``: a ``step_recorded`` that rides with
the execution's end). The next execution reads the latest one noted before it started
(``Turn.last_note``: in this log or in the records a fork copied from its parent), and seeds
the run's in-memory checkpoint with it, value for value (no reducer is applied twice). A
value the journal cannot keep as JSON is refused, naming its channel.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.channels.base import BaseChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.graph.state import CompiledStateGraph
from pydantic import JsonValue

from tether.integrations.langgraph._errors import NotJournaled
from tether.records import ApprovalDecided, InputAnswered

__all__ = (
    "MESSAGES",
    "STATE_STEP",
    "journaled_json",
    "read_channels",
    "seed_channels",
    "state_channels",
)

STATE_STEP = "tether.langgraph.state"
"""The step an execution ends with: its graph's channels other than ``messages``."""
MESSAGES = "messages"
_GATE_RECORDS = frozenset({ApprovalDecided.KIND, InputAnswered.KIND})
"""What a decision or an answer adds to an execution after its last own effect."""


Channel = BaseChannel[Any, Any, Any]


def state_channels(graph: CompiledStateGraph[Any, Any, Any, Any]) -> dict[str, Channel]:
    """The graph's state channels (every schema's keys, private ones included), by name."""
    return {
        name: channel
        for name in graph.builder.channels
        if isinstance(channel := graph.channels.get(name), BaseChannel)
    }


def journaled_json(value: Any, where: str) -> JsonValue:
    """``value`` if it is plain JSON (what the log keeps and gives back unchanged); else
    ``NotJournaled`` saying where it was found."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise NotJournaled(f"{where} is {value}, which JSON cannot hold")
    if isinstance(value, list):
        return [journaled_json(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise NotJournaled(f"{where} has a key {key!r} that is not a string")
        return {key: journaled_json(item, f"{where}.{key}") for key, item in value.items()}
    raise NotJournaled(
        f"{where} holds a {type(value).__name__}, which the journal cannot keep as JSON: keep "
        "the graph's state to JSON values (str, int, float, bool, None, and lists and dicts "
        "of them) so that it survives between submissions"
    )


def _thread(config: RunnableConfig) -> RunnableConfig:
    configurable = dict(config.get("configurable") or {})
    configurable.setdefault("checkpoint_ns", "")
    return {"configurable": configurable}


async def seed_channels(
    saver: BaseCheckpointSaver[Any], config: RunnableConfig, values: Mapping[str, JsonValue]
) -> None:
    """Start the run's thread at ``values`` (channel name to its checkpointed value)."""
    if not values:
        return
    checkpoint = empty_checkpoint()
    versions = {name: saver.get_next_version(None, None) for name in values}
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict(versions)
    await saver.aput(_thread(config), checkpoint, {"source": "update", "step": -1}, versions)


async def read_channels(
    saver: BaseCheckpointSaver[Any], config: RunnableConfig, names: Mapping[str, Channel]
) -> dict[str, Any]:
    """The checkpointed value of each channel in ``names`` that holds one, at the thread's
    latest checkpoint."""
    saved = await saver.aget_tuple(_thread(config))
    if saved is None:
        return {}
    values = saved.checkpoint["channel_values"]
    return {name: values[name] for name in names if name in values}
