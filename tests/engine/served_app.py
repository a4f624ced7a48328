"""A ``tether.App`` that uses what ``--app`` could not give before there was one: ``boss``
delegates to ``helper`` (subagents), greets with ``APP_GREETING`` from its env (the process
environment, the App's default), ``leaky``'s tool fails quoting a secret the App's redactor
hides, a schedule writes to ``helper/ticker``, and requests authenticate with the App's hook.
tests/engine/test_app.py runs it with ``Runtime.from_app``; tests/cli/test_serve_app.py
serves it with ``tether serve --app tests.engine.served_app:app``."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import HTTPConnection

from tether.agent import agent_spec, tool
from tether.auth import Identity
from tether.engine import AgentDefinition, AgentSpec, App, Schedule
from tether.messages import ModelRequest, ToolResultPart
from tether.models import ScriptedModel, ToolUse

SECRET = "s3cr3t-value-42"
APP_KEY = "let-me-in"


@tool
def leak() -> str:
    """A tool whose error quotes a secret."""
    raise RuntimeError(f"upstream refused key {SECRET}")


def _tool_results(request: ModelRequest) -> list[str]:
    return [part.content for part in request.messages[-1].parts if isinstance(part, ToolResultPart)]


def boss(instance: str, env: Mapping[str, str]) -> AgentSpec:
    greeting = env.get("APP_GREETING", "no greeting")

    def reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return f"{greeting}; helper said: {' | '.join(_tool_results(request))}"
        return ToolUse("task", {"agent": "helper", "prompt": "lend a hand"})

    return agent_spec(ScriptedModel(reply))


def helper(instance: str, env: Mapping[str, str]) -> AgentSpec:
    return agent_spec(ScriptedModel(lambda request: f"helped with {request.messages[-1].text}"))


def leaky(instance: str, env: Mapping[str, str]) -> AgentSpec:
    def reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return "the tool failed"
        return ToolUse("leak", {})

    return agent_spec(ScriptedModel(reply), tools=[leak])


def redact(text: str) -> str:
    return text.replace(SECRET, "[redacted by the app]")


def authenticate(request: HTTPConnection) -> Identity | None:
    if request.headers.get("x-app-key") != APP_KEY:
        return None
    return Identity("app-user")


def build() -> App:
    """The App (a factory: ``--app tests.engine.served_app:build`` works as well)."""
    return App(
        {
            "boss": AgentDefinition(boss),
            "helper": AgentDefinition(helper, description="Lends a hand."),
            "leaky": AgentDefinition(leaky),
        },
        subagents={"boss": ["helper"]},
        redact=redact,
        schedules=[Schedule("helper", "ticker", body="tick", every=1.0, kind="user")],
        authenticate=authenticate,
    )


app = build()
