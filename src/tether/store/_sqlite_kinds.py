"""How the SQLite store writes a record's kind: a small integer for every kind it knows."""

from __future__ import annotations

from typing import Final

__all__ = ("KIND_CODES", "kind_code", "kind_name")

KIND_CODES: Final = (
    "conversation_created",
    "user_message",
    "signal",
    "execution_started",
    "execution_ended",
    "execution_failed",
    "model_called",
    "assistant_message_started",
    "assistant_text_delta",
    "assistant_thinking_delta",
    "assistant_message_completed",
    "tool_called",
    "tool_outcome",
    "approval_requested",
    "approval_decided",
    "step_recorded",
    "steer_received",
    "compaction",
    "submission_settled",
    "task_spawned",
    "task_finished",
    "log_truncated",
    "input_requested",
    "input_answered",
    "version_changed",
    "patch_marked",
    "budget_requested",
    "budget_decided",
)
"""Record kinds stored as their index here. Stored codes are forever: only append."""
_CODE_OF: Final = {kind: code for code, kind in enumerate(KIND_CODES)}


def kind_code(kind: str) -> int | str:
    """What the ``kind`` column holds: a known kind's code, any other kind's name."""
    return _CODE_OF.get(kind, kind)


def kind_name(stored: int | str) -> str:
    return KIND_CODES[stored] if type(stored) is int else str(stored)
