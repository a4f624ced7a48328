"""Pins the public surface: a change here is a deliberate API change."""

import importlib
import subprocess
import sys

import pytest

PUBLIC = {
    "tether": (
        "Record",
        "RecordDraft",
        "SessionKey",
        "Store",
        "__version__",
        "open_store",
    ),
    "tether.errors": (
        "ApprovalBlocked",
        "ApprovalConflict",
        "ApprovalNotFound",
        "ApprovalParked",
        "AttachmentNotFound",
        "CanonicalizationError",
        "ClaimLost",
        "Conflict",
        "ConversationNotFound",
        "DispatchConflict",
        "DuplicateCallId",
        "Fenced",
        "HarnessMismatch",
        "IncompleteInvocation",
        "InheritedToolIntent",
        "InvalidApproval",
        "InvalidExecutionLog",
        "JournalError",
        "LogTampered",
        "MissingIdempotencyKey",
        "MissingToolExecutor",
        "NotFound",
        "RecordDecodeError",
        "RecordedModelFailure",
        "ReplayDiverged",
        "SeqOutOfRange",
        "SessionExists",
        "StoreError",
        "StoreUnavailable",
        "SubmissionNotFound",
        "TetherError",
        "TurnClosed",
        "UnmediatedToolCall",
        "UnsupportedSchema",
    ),
    "tether.records": (
        "ApprovalDecided",
        "ApprovalRequested",
        "AssistantMessageCompleted",
        "AssistantMessageStarted",
        "AssistantTextDelta",
        "AssistantThinkingDelta",
        "AttachmentRef",
        "Compaction",
        "ConversationCreated",
        "ConversationParent",
        "ExecutionEnded",
        "ExecutionFailed",
        "ExecutionStarted",
        "Mediation",
        "ModelCalled",
        "PAYLOAD_TYPES",
        "Payload",
        "Record",
        "RecordDraft",
        "SettlementStatus",
        "Signal",
        "SteerReceived",
        "StepRecorded",
        "SubmissionSettled",
        "TaskFinished",
        "TaskSpawned",
        "ToolCalled",
        "ToolOutcome",
        "ToolOutcomeStatus",
        "Usage",
        "UserMessage",
        "decode_record",
        "format_time",
        "now_rfc3339",
        "seal",
        "verify_chain",
    ),
    "tether.messages": (
        "DataPart",
        "FilePart",
        "Mediation",
        "Message",
        "ModelRequest",
        "ModelResponse",
        "Part",
        "Role",
        "TextPart",
        "ThinkingPart",
        "ToolCall",
        "ToolCallPart",
        "ToolOutcomeStatus",
        "ToolResult",
        "ToolResultPart",
        "ToolSpec",
        "Usage",
        "args_digest",
    ),
    "tether.tree": (
        "Node",
        "Reducer",
        "Tree",
        "reduce",
    ),
    "tether.store": (
        "Admission",
        "AttachmentStore",
        "Attempt",
        "Conversation",
        "DEFAULT_STORE_URL",
        "LogStore",
        "MemoryStore",
        "NewSubmission",
        "SessionKey",
        "SqliteStore",
        "Store",
        "Submission",
        "SubmissionStatus",
        "SubmissionStore",
        "open_store",
    ),
    "tether.journal": (
        "ApprovalState",
        "Decision",
        "Execution",
        "ExecutionResult",
        "Harness",
        "Journal",
        "JournalObserver",
        "Mode",
        "SteerSource",
        "ToolExecutor",
        "ToolScope",
        "Turn",
        "UNKNOWN_OUTCOME",
        "messages_of",
        "transcript",
    ),
    "tether.models": (
        "DeltaSink",
        "Model",
        "StreamDelta",
    ),
    "tether.testing": (
        "CountingModel",
        "RecordingTools",
        "ScriptedModel",
        "copy_prefix",
        "tool_call_response",
    ),
    "tether.testing.storetest": (
        "Fixtures",
        "StoreConformance",
        "run_reference_machine",
    ),
}


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_public_surface_is_pinned(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert isinstance(module.__all__, tuple)
    assert sorted(module.__all__) == sorted(PUBLIC[module_name])
    for name in module.__all__:
        assert hasattr(module, name), name


def test_import_tether_imports_no_framework_or_test_tool() -> None:
    code = (
        "import sys, tether, tether.store, tether.records, tether.tree\n"
        "banned = ('pytest', 'hypothesis', 'pydantic_ai', 'langgraph', 'langchain_core', 'agents',"
        " 'openai', 'opentelemetry', 'psycopg', 'fastapi', 'starlette', 'uvicorn')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in banned))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
