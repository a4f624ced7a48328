"""The app ``tether replay --against`` checks in tests/cli/test_gate.py: an assistant that asks
to email bob (a gated tool), as v1 recorded it, and the deploys checked against it (another
system prompt; a harness that makes another effect first); and the recording of its sessions."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, AgentSpec, pins_of
from tether.errors import ApprovalParked
from tether.journal import Journal, Turn, Versioning
from tether.messages import ModelRequest
from tether.models import ScriptedModel, ToolUse
from tether.records import UserMessage
from tether.store import SessionKey, open_store


@tool(requires_approval=True)
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def _reply(request: ModelRequest) -> object:
    if request.messages[-1].role == "user":
        return ToolUse("send_email", {"to": "bob"})
    return "done"


def spec(prompt: str) -> AgentSpec:
    return agent_spec(ScriptedModel(_reply), system_prompt=prompt, tools=[send_email])


class Audited:
    """A later deploy's harness: a step of its own before anything else."""

    def __init__(self, inner: AgentSpec) -> None:
        self.inner = inner.harness
        self.name, self.version = self.inner.name, self.inner.version

    def pins(self) -> object:
        return getattr(self.inner, "pins")()  # noqa: B009 (the built-in agent's pins)

    async def run(self, turn: Turn) -> JsonValue:
        await turn.step("audit", self._audit)
        result: JsonValue = await self.inner.run(turn)
        return result

    async def _audit(self) -> JsonValue:
        return "audited"


def _definition(prompt: str) -> AgentDefinition:
    built = spec(prompt)
    return AgentDefinition(lambda instance, env: built)


def v1() -> Mapping[str, AgentDefinition]:
    return {"assistant": AgentDefinition(lambda instance, env: spec("You are v1."), version="v1")}


def v2_prompt() -> Mapping[str, Mapping[str, AgentDefinition]]:
    """Versions side by side, as an app may give them: v2 (newest) has another prompt."""
    return {"assistant": {"v1": _definition("You are v1."), "v2": _definition("You are v2.")}}


def v2_patch() -> Mapping[str, AgentDefinition]:
    audited = spec("You are v1.")
    audited = AgentSpec(harness=Audited(audited), model=audited.model, tools=audited.tools)
    return {"assistant": AgentDefinition(lambda instance, env: audited, version="v2")}


async def record(url: str, *, parked: bool = True) -> None:
    """Under v1, in the store at ``url``: session ``done`` approved and finished, and (if
    ``parked``) session ``parked`` waiting for its approval; each conversation's id is its
    session's name."""
    built = spec("You are v1.")
    versioning = Versioning("v1", pins_of(built))
    async with await open_store(url) as store:
        for session in ["done", "parked"] if parked else ["done"]:
            key = SessionKey("assistant", "acme", session)
            journal = await Journal.open_session(
                store, key, model=built.model, tools=built.tools, conversation_id=session
            )
            try:
                await journal.exec(
                    built.harness, [UserMessage(body="mail bob")], versioning=versioning
                )
            except ApprovalParked as gate:
                if session == "done":
                    await journal.approve(gate.approval_id, "approve", approver="ann")
                    again = await Journal.open(store, session, model=built.model, tools=built.tools)
                    await again.resume(built.harness, versioning=versioning)
