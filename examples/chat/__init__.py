"""chat: the web console, opened on a chat agent that answers slowly enough to be steered.

Runbook (from the repository root, with the ``.venv`` the README's first command made)::

    .venv/bin/python -m examples.chat & SERVER=$!  # prints the console's URL once it listens:
    #   console: http://127.0.0.1:8485/ui?agent=chat&instance=me&session=default&panel=chat
    #   --open (opens it in your browser), --auth-token TOKEN (or TETHER_AUTH_TOKEN: the
    #   console asks for it once),
    #   --port, --host, --store sqlite:///./examples-data/chat (the default), --think-seconds
    #   (how long the agent thinks before it answers, 3 s), --chunk-delay (0.05 s a chunk)

1. Open the URL. Type a message (``what should I cook tonight?``) and press Enter. The
   answer streams in: a line ("Let me think about ..."), then the ``think`` tool, its
   progress ticking ("thinking about ...: step 1 of 3"), then the answer, a few words at a
   time.

2. Send another message, and while it thinks type ``make it vegetarian`` and press
   **Steer**. The running submission takes the steer at its next safe point (once ``think``
   is done): the answer ends with "You also told me: make it vegetarian." The same over
   HTTP::

    curl -s -XPOST localhost:8485/agents/chat/me -H 'content-type: application/json' \\
         -d '{"body": "what should I cook tonight?"}'          # 202, its submissionId
    curl -s -XPOST localhost:8485/agents/chat/me/steer -H 'content-type: application/json' \\
         -d '{"body": "make it vegetarian"}'    # 200 while it runs (409 once nothing does)
    curl -s 'localhost:8485/submissions/<submissionId>?wait=true'   # "... You also told me:
    #   make it vegetarian." The steer is a submission of its own, settled with
    #   {"deliveredTo": "<submissionId>"}; its steer_received record is in the execution of
    #   the submission it joined: curl -s localhost:8485/agents/chat/me/records

   A steer sent while the final answer streams comes too late for that run (its last safe
   point is behind it): it waits, and is answered as a message of its own right after.

3. Durability, with the page left open: send a message, and while the answer streams::

    kill -9 $SERVER; .venv/bin/python -m examples.chat & SERVER=$!  # the same store and port

   The page says it is reconnecting, then picks up by itself (the browser's EventSource
   reconnects with Last-Event-ID): the restarted server takes the run over, the cut partial
   answer is removed, and the answer streams once more, to its end. No reload needed.

4. ``.venv/bin/python -m examples.chat --auth-token s3cret``: the console asks for the token once
   (kept for the tab), and every API route wants it (``curl -s localhost:8485/sessions`` is
   401; ``-H 'Authorization: Bearer s3cret'`` passes). The page's own files are open.

With a real model (the same console, steering and recovery)::

    TETHER_MODEL=openai:gpt-4.1-mini OPENAI_API_KEY=... .venv/bin/python -m examples.chat --open
"""

from __future__ import annotations

import argparse
import asyncio
import os
import webbrowser
from urllib.parse import urlencode

from examples._serving import serve
from tether.agent import Tool, ToolContext, agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.http import create_app
from tether.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from tether.models import DeltaSink, EchoModel, ModelConfigError, check_model_env, model_from_env

__all__ = ("ChatModel", "agents", "console_url", "main", "think_tool")

PORT = 8485
STORE = "sqlite:///./examples-data/chat"
THINK_STEPS = 3
SYSTEM_PROMPT = (
    "You are a friendly chat assistant. Before each answer, call `think` once with the "
    "user's question (it takes a few seconds). Then answer in two or three sentences. If the "
    "user sent more messages while you were thinking, take them into account."
)


def think_tool(seconds: float) -> Tool:
    """``think``: a slow, side-effect-free tool that reports its progress: the window in which
    a steer joins the run."""

    @tool(idempotent=True)
    async def think(question: str, ctx: ToolContext) -> str:
        """Think a question over before answering it. Takes a few seconds."""
        for step in range(1, THINK_STEPS + 1):
            await ctx.progress(f"thinking about {question!r}: step {step} of {THINK_STEPS}")
            await asyncio.sleep(seconds / THINK_STEPS)
        return f"three thoughts on {question!r}: what it asks, why it matters, and what to try"

    return think


class ChatModel:
    """The keyless model, deterministic and offline, streaming in small chunks with a delay
    between them (:meth:`EchoModel.respond`): a new message gets a line and a ``think``
    call; the thought gets an answer, naming any steer that came in meanwhile."""

    def __init__(self, *, chunk: int = 4, delay: float = 0.05) -> None:
        self.echo = EchoModel(chunk=chunk, delay=delay)

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        messages = request.messages
        if _thought(messages):
            message = Message.assistant(_answer(messages))
        else:
            question = messages[-1].text.strip()
            think = ToolCallPart(
                call_id=f"call-{len(messages)}", name="think", args={"question": question}
            )
            intro = TextPart(text=f"Let me think about {question!r}.")
            message = Message(role="assistant", parts=(intro, think))
        return await self.echo.respond(request, message, stream)


def _thought(messages: tuple[Message, ...]) -> bool:
    """Whether the model's last move was a ``think`` call whose result (and maybe steers)
    followed; else the latest message is a new one."""
    for message in reversed(messages):
        if message.role == "assistant":
            return bool(message.tool_calls)
        if message.role not in ("tool", "user"):
            return False
    return False


def _answer(messages: tuple[Message, ...]) -> str:
    """The answer: the thought's result, and the steers that came in after the call."""
    called = max(i for i, m in enumerate(messages) if m.role == "assistant")
    thoughts, steers = [], []
    for message in messages[called + 1 :]:
        if message.role == "user":
            steers.append(message.text)
        thoughts += [p.content for p in message.parts if isinstance(p, ToolResultPart)]
    answer = f"Here is what I came up with: {' '.join(thoughts)}."
    if steers:
        answer += " You also told me: " + " / ".join(steers) + "."
    return answer + " (The keyless model; set TETHER_MODEL for real answers.)"


def agents(think_seconds: float = 3.0, chunk_delay: float = 0.05) -> dict[str, AgentDefinition]:
    """``chat``: the keyless model (or ``TETHER_MODEL``'s) with the ``think`` tool."""
    chosen = model_from_env(ChatModel(delay=chunk_delay), default_name="echo")
    spec = agent_spec(
        chosen.model,
        model_name=chosen.name,
        system_prompt=SYSTEM_PROMPT,
        tools=[think_tool(think_seconds)],
    )
    return {"chat": AgentDefinition(lambda instance, env: spec, description="chats, slowly")}


def console_url(host: str, port: int, instance: str = "me") -> str:
    """The console's URL, opened on the chat session (docs/console.md: the URL says what the
    page shows)."""
    query = {"agent": "chat", "instance": instance, "session": "default", "panel": "chat"}
    return f"http://{host}:{port}/ui?{urlencode(query)}"


def main(argv: list[str] | None = None) -> None:
    """Serve ``chat`` and the console until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m examples.chat",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--store", default=STORE, help=f"a store URL (default {STORE})")
    parser.add_argument("--open", action="store_true", help="open the console in a browser")
    parser.add_argument(
        "--auth-token",
        default=os.environ.get("TETHER_AUTH_TOKEN"),
        help="require this bearer token, the console asks for it (default $TETHER_AUTH_TOKEN)",
    )
    parser.add_argument("--think-seconds", type=float, default=3.0, help="default 3")
    parser.add_argument("--chunk-delay", type=float, default=0.05, help="default 0.05")
    args = parser.parse_args(argv)
    try:
        check_model_env()  # a bad TETHER_MODEL or a missing key fails now, not at a first call
    except ModelConfigError as exc:
        parser.exit(2, f"error: {exc}\n")
    runtime = Runtime(agents(args.think_seconds, args.chunk_delay), args.store)
    app = create_app(runtime, auth_token=args.auth_token, manage_runtime=True)
    url = console_url(args.host, args.port)
    browse = (lambda: webbrowser.open(url)) if args.open else None
    serve(app, args.host, args.port, f"console: {url}", started=browse)
