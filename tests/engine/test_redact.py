"""Secrets in error text are masked before they reach the permanent log or a settlement."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import JsonValue

from tether.engine import EngineEvent, SecretRedactor
from tether.errors import ModelFatalError, ModelTransientError
from tether.journal import Journal, ToolScope
from tether.messages import ModelRequest, ModelResponse, ToolCall
from tether.models import ScriptedModel
from tether.store import Store
from tether.testing import RecordingTools

from ..journal.harnesses import EchoHarness, LoopHarness
from .agents import agent, loop_agent

Make = Callable[..., Any]
SECRET = "sk-live-7f3a9c2e11d04b5e"


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TETHER_TEST_PROVIDER_API_KEY", SECRET)
    return SECRET


async def _leaks(store: Store, conversation_id: str, secret: str) -> list[str]:
    """The records whose stored bytes contain ``secret``, by kind and seq."""
    return [
        f"{record.kind}@{record.seq}"
        for record in await store.read(conversation_id, limit=10_000)
        if secret.encode() in record.canonical
    ]


async def _leaky_tool(call: ToolCall, scope: ToolScope) -> JsonValue:
    raise RuntimeError(f"401 Unauthorized: key {SECRET} was revoked")


async def test_a_tool_error_quoting_a_secret_is_masked(
    make_runtime: Make, store: Store, secret_env: str
) -> None:
    tools = RecordingTools({"lookup": _leaky_tool})
    async with make_runtime({"loop": loop_agent(tools)}) as runtime:
        receipt = await runtime.dispatch("loop", "acme", "please lookup the weather")
        settlement = await runtime.wait(receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert settlement["status"] == "succeeded", settlement
    [outcome] = [r.payload for r in records if r.kind == "tool_outcome"]
    assert outcome.to_json_object()["content"] == (
        "RuntimeError: 401 Unauthorized: key *** was revoked"
    )
    assert await _leaks(store, receipt.conversation_id, secret_env) == []
    # The harness was handed the masked result too, so a replay serves what the model saw.
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(LoopHarness()) == [settlement["result"]]


def _failing_model() -> ScriptedModel:
    replies: Iterator[BaseException] = iter(
        [
            ModelTransientError(f"rate limited for key {SECRET}"),
            ModelFatalError(f"invalid api key {SECRET}"),
        ]
    )
    return ScriptedModel(lambda request: next(replies))


async def test_model_errors_and_the_failed_settlement_are_masked(
    make_runtime: Make, store: Store, secret_env: str
) -> None:
    events: list[EngineEvent] = []
    definition = agent(EchoHarness(), _failing_model())
    async with make_runtime({"echo": definition}, observers=[events.append]) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hello")
        settlement = await runtime.wait(receipt.submission_id)
        info = await runtime.submission(receipt.submission_id)
    assert settlement["status"] == "failed" and settlement["errorCode"] == "run_failed"
    assert settlement["error"] == "ModelFatalError: invalid api key ***"
    stored = info.submission
    assert SECRET not in str(stored.settlement) and SECRET not in str(stored.last_error)
    kinds = [r.kind for r in await store.read(receipt.conversation_id)]
    # The transient failure was retried within the model call; the fatal one ended the run.
    assert kinds.count("execution_failed") == 1
    assert await _leaks(store, receipt.conversation_id, secret_env) == []
    # Observers (tracing, the event log) get the masked text too.
    errors = [str(getattr(e, "error", None) or getattr(e, "detail", "")) for e in events]
    assert "ModelFatalError: invalid api key ***" in errors
    assert not [error for error in errors if secret_env in error]


async def test_a_custom_redact_hook_replaces_the_default(
    make_runtime: Make, store: Store, secret_env: str
) -> None:
    tools = RecordingTools({"lookup": _leaky_tool})

    def redact(text: str) -> str:
        return text.replace("Unauthorized", "[redacted by hook]")

    async with make_runtime({"loop": loop_agent(tools)}, redact=redact) as runtime:
        receipt = await runtime.dispatch("loop", "acme", "please lookup the weather")
        await runtime.wait(receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    [outcome] = [r.payload for r in records if r.kind == "tool_outcome"]
    assert outcome.to_json_object()["content"] == (
        f"RuntimeError: 401 [redacted by hook]: key {SECRET} was revoked"
    )


async def test_the_hook_masks_a_failed_run_and_its_recovery_detail(
    make_runtime: Make, store: Store
) -> None:
    calls = iter([ModelTransientError("token abc123 throttled"), RuntimeError("token abc123")])

    def reply(request: ModelRequest) -> ModelResponse | str | BaseException:
        return next(calls)

    def redact(text: str) -> str:
        return text.replace("abc123", "<token>")

    definition = agent(EchoHarness(), ScriptedModel(reply))
    async with make_runtime({"echo": definition}, redact=redact) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hello")
        settlement = await runtime.wait(receipt.submission_id)
    assert settlement["error"] == "RuntimeError: token <token>"
    assert await _leaks(store, receipt.conversation_id, "abc123") == []


# --- the default redactor -------------------------------------------------------------------


def test_the_default_masks_values_of_variables_named_like_secrets() -> None:
    redact = SecretRedactor.from_env(
        {
            "OPENAI_API_KEY": "sk-aaaa",
            "github_token": "ghp_bbbb",
            "AWS_SECRET": "cccc",
            "PGPASSWORD": "hunter2",
            "HOME": "/home/dddd",
            "KEYBOARD": "eeee",
        }
    )
    text = "sk-aaaa ghp_bbbb cccc hunter2 /home/dddd eeee"
    assert redact(text) == "*** *** *** *** /home/dddd eeee"
    assert repr(redact) == "SecretRedactor(4 values)"  # never the values


def test_short_values_are_left_alone_and_the_longest_secret_wins() -> None:
    redact = SecretRedactor.from_env(
        {"FLAG_TOKEN": "on", "A_KEY": "abcd", "B_KEY": "abcdefgh"}, min_length=4
    )
    assert redact("on abcdefgh abcd") == "on *** ***"
    assert SecretRedactor()("nothing to mask") == "nothing to mask"


def test_the_runtime_reads_the_environment_and_its_agent_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tether.engine import Runtime

    monkeypatch.setenv("TETHER_TEST_SERVICE_TOKEN", "from-the-process")
    runtime = Runtime({}, "memory://", env={"UPSTREAM_PASSWORD": "from-the-agent-env"})
    assert runtime.redact("from-the-process from-the-agent-env") == "*** ***"
