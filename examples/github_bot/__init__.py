"""github_bot: GitHub webhooks, verified, become signals to the issue's session; the agent
answers each with a narrow ``reply`` tool that comments on that issue, once.

Start it (keyless: a scripted model, and replies go to a local outbox file)::

    export GITHUB_WEBHOOK_SECRET=change-me     # required: the webhook's secret on GitHub
    .venv/bin/python -m examples.github_bot    # http://127.0.0.1:8487, ./examples-data/github_bot

1. A signed delivery: an issue opened in ``octo/repo`` (a trimmed payload; GitHub's has
   many more fields). The signature is the HMAC-SHA256 of the exact bytes sent::

    cat > issue.json <<'EOF'
    {"action": "opened", "repository": {"full_name": "octo/repo"}, "sender": {"login": "mona"},
     "issue": {"number": 7, "title": "Crash on start", "user": {"login": "mona"}}}
    EOF
    HMAC=$(openssl dgst -sha256 -hmac "$GITHUB_WEBHOOK_SECRET" < issue.json | sed 's/^.* //')
    curl -s -XPOST localhost:8487/webhooks/github -H 'content-type: application/json' \\
         -H 'X-GitHub-Event: issues' -H 'X-GitHub-Delivery: 0b7e4a2c-0007-4000-8000-000000000001' \\
         -H "X-Hub-Signature-256: sha256=$HMAC" --data-binary @issue.json

   202: ``"accepted": true``, ``"duplicate": false``, its ``submissionId``, the session
   ``issue-7`` of the instance ``octo.repo``. Watch it (the stream ends once it is done),
   then read the reply::

    curl -s 'localhost:8487/agents/bot/octo.repo?session=issue-7&view=stream'
    cat examples-data/github_bot/outbox.jsonl

   The stream shows the signal, the ``reply`` call and its result; the outbox one line,
   ``{"repo": "octo/repo", "issue": 7, "body": "Thanks for opening this issue, @mona! ...",
   "idempotencyKey": "<execution id>:<call id>"}``.

2. A redelivery (GitHub's "Redeliver", or a retry): the same ``curl`` again. The same 202,
   the same ``submissionId``, ``"duplicate": true``; nothing runs, no second line.

3. A bad signature: 401 ``invalid_signature``, and nothing stored::

    curl -s -XPOST localhost:8487/webhooks/github -H 'content-type: application/json' \\
         -H 'X-GitHub-Event: issues' -H 'X-GitHub-Delivery: 0b7e4a2c-0007-4000-8000-000000000002' \\
         -H 'X-Hub-Signature-256: sha256=0000' --data-binary @issue.json

Other events (a ping, a push, the bot's own comments, other bots') get a 202 with
``"accepted": false``: acknowledged, nothing admitted.

On GitHub: give the bot a token that may write issues, and have the repository's webhook
(content type ``application/json``, events *Issues* and *Issue comments*, the same secret)
reach ``/webhooks/github``. Keep the server on loopback: only the webhook's path is
verified, every other route is open. Put a reverse proxy in front that forwards that path
alone, or, to try it, let the GitHub CLI's webhook extension forward the deliveries (``gh
extension install cli/gh-webhook``; ``gh webhook forward --help``)::

    GITHUB_TOKEN=ghp_... .venv/bin/python -m examples.github_bot
    gh webhook forward --repo octo/repo --events issues,issue_comment \\
       --url http://127.0.0.1:8487/webhooks/github --secret "$GITHUB_WEBHOOK_SECRET"

It then posts each reply to ``$GITHUB_API_URL/repos/{owner}/{repo}/issues/{n}/comments``
(default ``https://api.github.com``), with a hidden ``<!-- tether:github_bot key=... -->``
marker that keeps it from answering itself. With a real model::

    TETHER_MODEL=openai:gpt-4.1-mini OPENAI_API_KEY=... .venv/bin/python -m examples.github_bot

``kill -9`` mid-reply: ``reply`` is declared non-idempotent, and its intent is durable,
with its idempotency key, before it posts. Killed after that and before its outcome is
recorded, the restarted server resumes the session but never runs ``reply`` again: the
call's outcome is ``unknown`` (it may or may not have been posted), the bot says it could
not confirm its reply, and no comment is posted twice. Whether it landed is found by the
key: the outbox line's ``idempotencyKey``, or the marker in the comment (sent as the
``Idempotency-Key`` header too). Try it with ``--reply-delay 10`` (it waits before posting)
and a ``kill -9`` within those seconds. A crash before the intent only asks the model again;
one after the outcome is recorded is served from the log.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import unescape

import httpx
from pydantic import JsonValue

from examples._serving import serve
from tether import AgentDefinition, AgentSpec, Runtime
from tether.agent import Tool, ToolContext, agent_spec, tool
from tether.http import create_app
from tether.http.webhooks import Delivery, WebhookTarget, github_webhook
from tether.messages import ModelRequest, ToolResultPart
from tether.models import (
    ModelConfigError,
    Rule,
    ScriptedModel,
    Text,
    ToolUse,
    check_model_env,
    model_from_env,
)

__all__ = ("Poster", "agents", "issue_session", "main")

AGENT = "bot"
PORT = 8487
STORE = "sqlite:///./examples-data/github_bot"
OUTBOX = "./examples-data/github_bot/outbox.jsonl"
MARK = "<!-- tether:github_bot"
PROMPT = (
    "You are a GitHub bot. Each message is a GitHub webhook event: a <signal> whose body is "
    "the event's JSON payload. For a new issue or a new comment, call `reply` once with a "
    "short, friendly comment in Markdown, then say in one line what you did. If `reply` "
    "failed or its outcome is unknown, do not call it again: say so."
)
logger = logging.getLogger("examples.github_bot")


def issue_session(delivery: Delivery) -> WebhookTarget | None:
    """An issue opened or reopened, or a comment on one, goes to the session ``issue-<n>``
    of the instance ``owner.repo``; anything else (and comments by bots, this one's
    included) to none."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    issue, repo, comment = payload.get("issue"), payload.get("repository"), payload.get("comment")
    if not isinstance(issue, dict) or not isinstance(repo, dict):
        return None
    wanted = {"issues": ("opened", "reopened"), "issue_comment": ("created",)}
    if delivery.action not in wanted.get(delivery.event, ()):
        return None
    if isinstance(comment, dict) and MARK in str(comment.get("body", "")):
        return None  # the bot's own reply: answering it would loop
    sender = payload.get("sender")
    if isinstance(sender, dict) and sender.get("type") == "Bot":
        return None  # nor does it talk with other bots
    number, full_name = issue.get("number"), repo.get("full_name")
    if not isinstance(number, int) or not isinstance(full_name, str) or "/" not in full_name:
        return None
    return WebhookTarget(AGENT, full_name.replace("/", "."), session=f"issue-{number}")


# --- posting a comment: to the outbox, or to GitHub -------------------------------------


class Poster:
    """Where replies go: GitHub's API with a token, else the outbox file (JSON lines)."""

    def __init__(self, outbox: Path, token: str | None, api_url: str, delay: float) -> None:
        self.outbox, self.token, self.api_url, self.delay = outbox, token, api_url, delay

    async def post(self, repo: str, issue: int, body: str, key: str) -> str:
        await asyncio.sleep(self.delay)  # --reply-delay: time to kill -9 mid-reply
        if self.token is None:
            line = {"repo": repo, "issue": issue, "body": body, "idempotencyKey": key}
            with self.outbox.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
                out.flush()
                os.fsync(out.fileno())
            return f"wrote the reply to {self.outbox}"
        async with httpx.AsyncClient(base_url=self.api_url, timeout=30) as client:
            response = await client.post(
                f"/repos/{repo}/issues/{issue}/comments",
                json={"body": f"{body}\n\n{MARK} key={key} -->"},
                headers={
                    "Authorization": f"Bearer {self.token}",
                    "Accept": "application/vnd.github+json",
                    "X-GitHub-Api-Version": "2022-11-28",
                    "Idempotency-Key": key,
                },
            )
            response.raise_for_status()  # an error result the model reads
        return f"posted {response.json().get('html_url', 'the comment')}"


def reply_tool(instance: str, poster: Poster) -> Tool:
    """``reply(body)``, bound to the session's repository and issue: the model picks neither."""
    owner, _, name = instance.partition(".")  # an owner's name has no "."

    @tool  # not idempotent: a call whose outcome a crash lost is never run again
    async def reply(body: str, ctx: ToolContext) -> str:
        """Post a comment on the issue this conversation is about."""
        issue = int(ctx.session.removeprefix("issue-"))
        return await poster.post(f"{owner}/{name}", issue, body, ctx.idempotency_key)

    return reply


# --- the keyless model ------------------------------------------------------------------

SIGNAL = re.compile(r'<signal type="(?P<type>[^"]*)"[^>]*>(?P<body>.*)</signal>', re.DOTALL)


def _event(request: ModelRequest) -> tuple[str, dict[str, JsonValue]]:
    """The latest webhook signal the model was shown: its type and payload."""
    for message in reversed(request.messages):
        found = SIGNAL.search(message.text) if message.role == "user" else None
        if found is not None:
            payload = json.loads(unescape(found["body"]))
            return found["type"], payload if isinstance(payload, dict) else {}
    return "", {}


def _login(payload: dict[str, JsonValue], field: str) -> str:
    thing = payload.get(field)
    user = thing.get("user") if isinstance(thing, dict) else None
    return str(user.get("login", "there")) if isinstance(user, dict) else "there"


def _answer(request: ModelRequest) -> ToolUse | Text:
    kind, payload = _event(request)
    issue = payload.get("issue") if isinstance(payload.get("issue"), dict) else {}
    title = issue.get("title", "") if isinstance(issue, dict) else ""
    if kind.startswith("github.issues."):
        body = (
            f"Thanks for opening this issue, @{_login(payload, 'issue')}! I have read "
            f'"{title}"; a maintainer will triage it soon.'
        )
    elif kind == "github.issue_comment.created":
        body = f"Thanks, @{_login(payload, 'comment')}: noted. A maintainer will follow up here."
    else:
        return Text(f"Nothing to answer for {kind or 'this message'}.")
    return ToolUse("reply", {"body": body})


def _after_reply(request: ModelRequest) -> Text:
    result = next(p for p in request.messages[-1].parts if isinstance(p, ToolResultPart))
    _, payload = _event(request)
    issue = payload.get("issue")
    where = f"#{issue.get('number')}" if isinstance(issue, dict) else "the issue"
    if result.is_error:
        return Text(f"I could not confirm my reply on {where}: {result.content}")
    return Text(f"Replied on {where}: {result.content}")


BOT_MODEL = ScriptedModel(
    [Rule("<signal", _answer), Rule("", _after_reply, on="tool")],
    default=Text("I only answer GitHub issue events."),
    record=False,  # a server's model keeps no requests
)


def agents(poster: Poster) -> dict[str, AgentDefinition]:
    def bot(instance: str, env: Mapping[str, str]) -> AgentSpec:
        chosen = model_from_env(BOT_MODEL, default_name="scripted")
        tools = [reply_tool(instance, poster)]
        return agent_spec(chosen.model, model_name=chosen.name, system_prompt=PROMPT, tools=tools)

    return {AGENT: AgentDefinition(bot, description="answers GitHub issue events")}


def main(argv: list[str] | None = None) -> None:
    """``.venv/bin/python -m examples.github_bot [--host H] [--port P] [--store URL]
    [--outbox FILE]``."""
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m examples.github_bot", description=__doc__
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--store", default=STORE, help=f"a store URL (default {STORE})")
    parser.add_argument("--outbox", default=OUTBOX, help=f"keyless replies (default {OUTBOX})")
    parser.add_argument("--reply-delay", type=float, default=0.0, help="seconds before a post")
    args = parser.parse_args(argv)
    secret = os.environ.get("GITHUB_WEBHOOK_SECRET", "").strip()
    if not secret:
        parser.exit(
            2,
            "error: set GITHUB_WEBHOOK_SECRET to your GitHub webhook's secret: every "
            "delivery's X-Hub-Signature-256 is checked with it "
            "(e.g. export GITHUB_WEBHOOK_SECRET=change-me)\n",
        )
    try:
        check_model_env()  # a bad TETHER_MODEL or a missing key fails now, not at a request
    except ModelConfigError as exc:
        parser.exit(2, f"error: {exc}\n")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    outbox = Path(args.outbox)
    outbox.parent.mkdir(parents=True, exist_ok=True)
    token = os.environ.get("GITHUB_TOKEN") or None
    api_url = os.environ.get("GITHUB_API_URL") or "https://api.github.com"
    logger.info("replies go to %s", f"{api_url} (GITHUB_TOKEN)" if token else outbox)
    runtime = Runtime(agents(Poster(outbox, token, api_url, args.reply_delay)), args.store)
    hook = github_webhook(runtime, secret=secret, target=issue_session)
    banner = f"serving the bot on http://{args.host}:{args.port} (POST /webhooks/github)"
    serve(create_app(runtime, manage_runtime=True, webhooks=[hook]), args.host, args.port, banner)
