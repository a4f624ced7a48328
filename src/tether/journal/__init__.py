"""The effect journal (docs/architecture.md §5): every nondeterministic effect of an execution
is recorded in the conversation log, which is then the checkpoint, the audit trail and the
replay source.

Example::

    from tether.journal import Journal

    journal = await Journal.open(store, conversation_id, model=model, tools=tools)
    result = await journal.exec(harness, [UserMessage(body="hello")])
    outputs = await (await Journal.open(store, conversation_id)).replay(harness)  # 0 model calls
"""

from tether.journal._approvals import ApprovalState, Decision, open_gate
from tether.journal._check import ReplayCheck
from tether.journal._cut import loose_ends
from tether.journal._effects import (
    Delegation,
    EffectWrappers,
    JournalHooks,
    JournalObserver,
    Stamp,
    SteerSource,
    ToolExecutor,
    ToolScope,
)
from tether.journal._executions import Execution
from tether.journal._harness import Harness
from tether.journal._history import SIGNAL_MEDIA_TYPE, messages_of, transcript
from tether.journal._journal import Ending, ExecutionResult, Finisher, Journal
from tether.journal._log import NOT_MINTED, Fence, NotMinted
from tether.journal._notes import STREAM_DATA
from tether.journal._tool_policy import ToolFailure, ToolPolicy
from tether.journal._truncate import truncation_anchor, truncation_point
from tether.journal._turn import UNKNOWN_OUTCOME, Mode, Turn
from tether.journal._versions import Versioning, diff_pins
from tether.journal._view import LogView

__all__ = (
    "NOT_MINTED",
    "SIGNAL_MEDIA_TYPE",
    "STREAM_DATA",
    "UNKNOWN_OUTCOME",
    "ApprovalState",
    "Decision",
    "Delegation",
    "EffectWrappers",
    "Ending",
    "Execution",
    "ExecutionResult",
    "Fence",
    "Finisher",
    "Harness",
    "Journal",
    "JournalHooks",
    "JournalObserver",
    "LogView",
    "Mode",
    "NotMinted",
    "ReplayCheck",
    "Stamp",
    "SteerSource",
    "ToolExecutor",
    "ToolFailure",
    "ToolPolicy",
    "ToolScope",
    "Turn",
    "Versioning",
    "diff_pins",
    "loose_ends",
    "messages_of",
    "open_gate",
    "transcript",
    "truncation_anchor",
    "truncation_point",
)
