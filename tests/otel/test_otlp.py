"""Spans over OTLP/HTTP, as ``tether serve --otlp-endpoint`` exports them (``otlp_provider``),
into a local receiver that decodes the collector's protobuf: names, kinds, parent links,
attributes and events of a run that calls a model and a tool and parks for an approval; the
attempts of one submission in one trace, a recovery after SIGKILL included."""

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.models.pydantic_ai import PydanticAIModel
from tether.otel import OtelInterceptor, otlp_provider
from tether.store import Store, SubmissionStatus

from ..cli.conftest import start_server
from ..engine.test_approvals import pending_gate
from ..engine.test_runtime import settle
from ..fakes.openai_server import Answer, Call, FakeOpenAI
from .collector import Collector, Received, collector

pytestmark = pytest.mark.process

__all__ = ("collector",)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
MODEL = "openai-chat:gpt-4.1-mini"
EMAIL = {"to": "bob@example.com", "text": "lunch at noon?"}


def derived(submission_id: str) -> tuple[str, str]:
    """The trace id of a submission dispatched without a trace, and its attempts' parent span
    id, as docs/tracing.md states them: SHA-256 of ``tether.submission``, NUL, the id."""
    digest = hashlib.sha256(b"tether.submission\x00" + submission_id.encode()).digest()
    return digest[:16].hex(), digest[16:24].hex()


@tool(requires_approval=True)
async def send_email(to: str, text: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def mailer() -> AgentDefinition:
    """The built-in agent on a real provider client (pydantic-ai's OpenAI model over the openai
    SDK) against the fake OpenAI API, with a tool that needs an approval."""
    return AgentDefinition(
        lambda instance, env: agent_spec(
            PydanticAIModel(MODEL), model_name=MODEL, tools=[send_email]
        )
    )


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake")
        yield server


async def test_a_parked_and_resumed_run_exported_over_otlp(
    collector: Collector, fake: FakeOpenAI, store: Store
) -> None:
    fake.add(Answer(calls=(Call("send_email", EMAIL),)), Answer(text="Sent."))
    provider = otlp_provider(collector.url, schedule_delay=0.05)
    interceptor = OtelInterceptor(provider.get_tracer("tether"))
    try:
        async with Runtime(
            {"mailer": mailer()}, store, interceptors=[interceptor], claim_interval=0.02
        ) as runtime:
            receipt = await runtime.dispatch("mailer", "acme", "email bob about lunch")
            approval_id = await pending_gate(runtime, store, receipt)
            waiting = await runtime.submission(receipt.submission_id)
            assert waiting.status is SubmissionStatus.WAITING
            await runtime.approve(approval_id, "approve", approver="ann")
            assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
            records = await runtime.records(receipt.conversation_id)
    finally:
        provider.shutdown()  # flushes the batch
    spans = collector.wait_for(lambda spans: len(spans) >= 7)
    assert set(collector.posts) == {"/v1/traces application/x-protobuf"}
    assert sorted(s.name for s in spans) == [
        "chat gpt-4.1-mini",
        "chat gpt-4.1-mini",
        "execute_tool send_email",
        "execution exec",
        "execution resume",
        "invoke_agent mailer",
        "invoke_agent mailer",
    ]
    by_id = {s.span_id: s for s in spans}
    trace_id, parent_id = derived(receipt.submission_id)
    assert {s.trace_id for s in spans} == {trace_id}  # both attempts, one trace
    assert {s.service for s in spans} == {"tether"}
    assert all(s.status == "UNSET" for s in spans), [(s.name, s.status) for s in spans]
    [exec_, resume] = [by_name(spans, "execution exec"), by_name(spans, "execution resume")]
    first, second = by_id[exec_.parent_span_id], by_id[resume.parent_span_id]
    assert first.name == second.name == "invoke_agent mailer" and first is not second
    assert first.parent_span_id == second.parent_span_id == parent_id
    asked, answered = sorted(
        (s for s in spans if s.name.startswith("chat ")),
        key=lambda s: str(s.attributes["gen_ai.response.id"]),
    )
    [email] = [s for s in spans if s.name == "execute_tool send_email"]
    assert asked.parent_span_id == exec_.span_id
    assert email.parent_span_id == answered.parent_span_id == resume.span_id
    assert {s.name: s.kind for s in spans} == {
        "invoke_agent mailer": "INTERNAL",
        "execution exec": "INTERNAL",
        "execution resume": "INTERNAL",
        "chat gpt-4.1-mini": "CLIENT",
        "execute_tool send_email": "INTERNAL",
    }

    ids = {
        "gen_ai.conversation.id": receipt.conversation_id,
        "tether.agent": "mailer",
        "tether.instance": "acme",
        "tether.session": "default",
        "tether.conversation_id": receipt.conversation_id,
        "tether.submission_id": receipt.submission_id,
    }
    for span in spans:
        assert ids.items() <= span.attributes.items(), span
    assert first.attributes["tether.attempt_id"] != second.attributes["tether.attempt_id"]
    assert first.attributes | second.attributes == {
        **ids,
        "tether.attempt_id": second.attributes["tether.attempt_id"],
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "mailer",
    }
    assert asked.attributes == {
        **ids,
        "tether.attempt_id": first.attributes["tether.attempt_id"],
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4.1-mini",
        "gen_ai.response.model": "gpt-4.1-mini",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.finish_reasons": ["tool_call"],
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.usage.cache_read.input_tokens": 0,
    }
    assert answered.attributes["gen_ai.response.id"] == "chatcmpl-2"
    assert answered.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    [call] = fake.requests[1].body["messages"][-2]["tool_calls"]  # the call, sent back
    call_id = call["id"]
    assert email.attributes == {
        **ids,
        "tether.attempt_id": second.attributes["tether.attempt_id"],
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "send_email",
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }

    # The park: an event on the spans it ended, not an error.
    [execution_id] = {r.execution_id for r in records if r.kind == "approval_requested"}
    parked = (
        "tether.parked",
        {
            "tether.parked.reason": "approval",
            "tether.approval_id": approval_id,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.name": "send_email",
            "tether.execution_id": execution_id,
        },
    )
    assert first.events == exec_.events == [parked]
    assert second.events == resume.events == email.events == asked.events == []


def by_name(spans: list[Received], name: str) -> Received:
    [span] = [s for s in spans if s.name == name]
    return span


def test_spans_are_exported_over_otlp_under_the_callers_trace(
    tmp_path: Path, collector: Collector
) -> None:
    server = start_server(
        tmp_path / "data", tmp_path / "serve.log", "--otlp-endpoint", collector.url
    )
    try:
        accepted = httpx.post(
            f"{server.url}/agents/assistant/me",
            params={"wait": True},
            json={"body": "research tides"},
            headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
            timeout=90,
        )
        assert accepted.json()["status"] == "succeeded", accepted.text
        collector.wait_for(lambda spans: any(s.name == "invoke_agent assistant" for s in spans))
    finally:
        server.stop()
    by_name = {span.name: span for span in collector.spans}
    agent = by_name["invoke_agent assistant"]
    assert agent.trace_id == TRACE_ID and agent.parent_span_id == PARENT_ID
    assert {"chat echo", "execute_tool research"} <= set(by_name)
    assert all(span.trace_id == TRACE_ID for span in collector.spans)


@pytest.mark.timeout(240)  # two servers start, importing the exporter: slow on a loaded machine
def test_an_attempt_recovered_after_sigkill_joins_the_submissions_trace(
    tmp_path: Path, collector: Collector
) -> None:
    """No caller trace: the attempt a restarted server makes after ``kill -9`` mid-tool is in
    the trace of the attempt that was killed (whose open spans died with it)."""
    data, log = tmp_path / "data", tmp_path / "serve.log"
    otlp = ("--otlp-endpoint", collector.url, "--lease", "1")
    first = start_server(data, log, *otlp, TETHER_DEMO_RESEARCH_SECONDS="60")
    try:
        accepted = httpx.post(
            f"{first.url}/agents/assistant/me", json={"body": "research tides"}, timeout=30
        ).json()
        # The model call that asked for the tool ended (and was exported): the tool runs.
        collector.wait_for(lambda spans: any(s.name == "chat echo" for s in spans))
    finally:
        first.kill()
    [killed] = collector.spans  # the attempt and its execution never ended
    second = start_server(data, log, *otlp, TETHER_DEMO_RESEARCH_SECONDS="0.1")
    try:
        settled = httpx.get(
            f"{second.url}/submissions/{accepted['submissionId']}",
            params={"wait": True},
            timeout=90,
        ).json()
        assert settled["status"] == "settled", settled
        collector.wait_for(lambda spans: any(s.name == "invoke_agent assistant" for s in spans))
    finally:
        second.stop()
    trace_id, parent_id = derived(accepted["submissionId"])
    assert killed.trace_id == trace_id
    assert {s.trace_id for s in collector.spans} == {trace_id}
    [recovered] = collector.named("invoke_agent assistant")
    assert recovered.parent_span_id == parent_id
    assert recovered.attributes["tether.attempt_id"] != killed.attributes["tether.attempt_id"]
    assert [s.name for s in collector.spans if s.parent_span_id == recovered.span_id] == [
        "execution resume"
    ]
