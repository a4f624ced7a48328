"""An app for ``tether serve --app tests.cli.asking:agents``: ``asker`` asks for a name (a
string) and answers with it."""

from __future__ import annotations

from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec
from tether.journal import Turn


class Asker:
    name, version = "asker", "1"

    async def run(self, turn: Turn) -> JsonValue:
        name = await turn.ask("What is your name?", schema={"type": "string"})
        return f"Hello, {name}!"


def agents() -> dict[str, AgentDefinition]:
    return {"asker": AgentDefinition(lambda instance, env: AgentSpec(harness=Asker()))}
