"""multitenant: one agent definition, many tenants; the instance picks the tenant's prompt.

Runbook (from the repository root, with the ``.venv`` the README's first command made)::

    .venv/bin/python -m examples.multitenant & SERVER=$!  # http://127.0.0.1:8489, tenants
    #   acme, globex, initech; --port, --host, --store sqlite:///./examples-data/multitenant
    #   (the default), --model-seconds (how long each keyless model call takes, 0.3 s)

    # The path is /agents/support/<tenant>: the instance is the tenant, and a session in it
    # is a user (or a ticket). The answer is in the tenant's voice: its own system prompt.
    curl -s -XPOST 'localhost:8489/agents/support/acme?wait=true' \\
         -H 'content-type: application/json' -d '{"body": "my anvil fell", "session": "wile"}'
    #   {"status": "succeeded", "result": "Acme Anvils support, cheerfully: answer 1 to 'my
    #    anvil fell'", ...}
    curl -s -XPOST 'localhost:8489/agents/support/globex?wait=true' \\
         -H 'content-type: application/json' -d '{"body": "hello", "session": "hank"}'
    #   "result": "Globex Corporation support, formally: answer 1 to 'hello'"

    # A tenant the server does not know is refused when its agent is initialized.
    curl -s -XPOST 'localhost:8489/agents/support/hooli?wait=true' \\
         -H 'content-type: application/json' -d '{"body": "hello"}'
    #   {"status": "failed", "error": "UnknownTenant: no tenant 'hooli' (the tenants are acme,
    #    globex, initech)", "errorCode": "run_failed", ...}

    # On a stopwatch: 3 messages to each of 3 sessions per tenant, all sent at once.
    .venv/bin/python -m examples.multitenant.load --url http://127.0.0.1:8489
    #   each row a session, each digit a message running (0.1 s a column):
    #   acme/user-1     11122223333
    #   acme/user-2     11122223333
    #   ...
    #   initech/user-3  11122223333
    #   27 answers in 1.1 s (one call takes 0.3 s; one after another they would take 8.9 s)
    #   head-of-line order in every session: yes; sessions running at once: up to 9
    #   (--tenants, --sessions per tenant, --messages per session, --json for a program)
    kill $SERVER

One session runs one submission at a time, in the order they were admitted (its head of
line): a session's messages answer one after the other, each seeing the answers before it.
Sessions, of one tenant or of several, run in parallel, so many sessions finish in about the
time of one. With a real model::

    TETHER_MODEL=openai:gpt-4.1-mini OPENAI_API_KEY=... .venv/bin/python -m examples.multitenant
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from examples._serving import serve
from tether.agent import agent_spec
from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.http import create_app
from tether.messages import ModelRequest
from tether.models import (
    Delay,
    ModelConfigError,
    ScriptedModel,
    Text,
    check_model_env,
    model_from_env,
)

__all__ = ("TENANTS", "UnknownTenant", "agents", "main")

PORT = 8489
TENANTS: dict[str, str] = {
    "acme": "You are Acme Anvils support, cheerfully. Answer in one cheerful sentence.",
    "globex": "You are Globex Corporation support, formally. Answer in one formal sentence.",
    "initech": "You are Initech support, tersely. Answer in as few words as you can.",
}
"""Each tenant's system prompt: what makes one agent definition many tenants' agents."""


class UnknownTenant(LookupError):
    """The instance names no tenant: the submission fails (``run_failed``) with this message."""


def keyless_model(seconds: float) -> ScriptedModel:
    """Deterministic and offline: it answers in the voice its system prompt names, counting
    the session's messages, after ``seconds`` (as a real model takes a while)."""

    def answer(request: ModelRequest) -> list[Delay | Text]:
        system, *messages = request.messages
        voice = system.text.removeprefix("You are ").split(".")[0]
        asked = sum(message.role == "user" for message in messages)
        return [Delay(seconds), Text(f"{voice}: answer {asked} to {messages[-1].text!r}")]

    return ScriptedModel(answer, chunk=8, record=False)  # a server's model keeps no requests


def agents(model_seconds: float = 0.3) -> dict[str, AgentDefinition]:
    """``support``: one definition for every tenant."""
    chosen = model_from_env(keyless_model(model_seconds), default_name="scripted")

    def support(instance: str, env: Mapping[str, str]) -> AgentSpec:
        """Runs on every claim: the instance is the tenant, and picks its prompt."""
        prompt = TENANTS.get(instance)
        if prompt is None:
            known = ", ".join(sorted(TENANTS))
            raise UnknownTenant(f"no tenant {instance!r} (the tenants are {known})")
        return agent_spec(chosen.model, model_name=chosen.name, system_prompt=prompt)

    return {"support": AgentDefinition(support)}


def main(argv: list[str] | None = None) -> None:
    """Serve ``support`` until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m examples.multitenant",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--store", default="sqlite:///./examples-data/multitenant")
    parser.add_argument("--model-seconds", type=float, default=0.3, help="default 0.3")
    args = parser.parse_args(argv)
    try:
        check_model_env()  # a bad TETHER_MODEL or a missing key fails now, not at a first call
    except ModelConfigError as exc:
        parser.exit(2, f"error: {exc}\n")
    runtime = Runtime(agents(args.model_seconds), args.store)
    banner = f"serving support for {', '.join(TENANTS)} on http://{args.host}:{args.port}"
    serve(create_app(runtime, manage_runtime=True), args.host, args.port, banner)
