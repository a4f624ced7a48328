"""The browser tests' extra agent, served beside the demo's (``--app
tests.browser.agents:agents``): ``slow`` echoes like the demo model, streaming its answer a
few characters at a time, and stops half-way until a gate file exists. A test can so kill the
server while an answer is cut mid-stream, with no race: the file is made before the restart,
and the model asked again streams the whole answer. ``limited`` is ``slow`` with one run in
flight at a time (``Limits(concurrency=1)``): while one waits for the gate file, the next is
held back by the limit. ``budgeted`` is ``slow`` with a session budget, which the session's
spend panel shows. Tenant ``acme`` (the signed-in tests' tenant) has a budget for the day,
which the console's Usage panel shows."""

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path

from tether.agent import agent_spec
from tether.engine import AgentDefinition, AgentSpec, App, Budget, Limits, TenantBudget
from tether.messages import ModelRequest, ModelResponse
from tether.models import DeltaSink, EchoModel, StreamDelta

GATE = "TETHER_TEST_GATE"
"""The file ``slow`` waits for half-way through an answer (no wait when unset)."""
CHUNK = 4


class GatedModel(EchoModel):
    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        answer = await super().request(request)  # the whole answer, unstreamed
        text = answer.message.text
        if stream is not None:
            gate = os.environ.get(GATE)
            half = len(text) // 2 // CHUNK * CHUNK
            for start in range(0, len(text), CHUNK):
                if gate and start == half - CHUNK:
                    # The journal writes held deltas on the first one 200 ms after them:
                    # this one writes the first half before the wait.
                    await asyncio.sleep(0.3)
                if gate and start == half:
                    # The file comes from another process: no event to wait on, a poll.
                    while not await asyncio.to_thread(Path(gate).exists):  # noqa: ASYNC110
                        await asyncio.sleep(0.05)
                await stream(StreamDelta("text", text[start : start + CHUNK]))
                await asyncio.sleep(0.02)  # a model's pace, for the page to render as it comes
        return answer


def slow(instance: str, env: Mapping[str, str]) -> AgentSpec:
    return agent_spec(GatedModel(), model_name="echo", system_prompt="You are slow.")


ACME_DAY = TenantBudget(model_calls=1000, cost_usd=5.0, period="day")
SESSION_BUDGET = Budget(model_calls=5, tokens=100_000)


def agents() -> App:
    return App(
        {
            "slow": AgentDefinition(slow),
            "limited": AgentDefinition(slow, limits=Limits(concurrency=1)),
            "budgeted": AgentDefinition(slow, session_budget=SESSION_BUDGET),
        },
        env={},
        tenant_budgets={"acme": ACME_DAY},
    )
