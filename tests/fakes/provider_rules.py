"""What a real provider refuses in a conversation's history, as the provider says it.

OpenAI's Chat Completions and Responses APIs and Anthropic's Messages API all answer 400 to a
history in which a tool call is not answered, before any other message, by a result for
exactly that call, or in which a result answers no call just made. A transcript Tether hands
a model must never break these rules, whatever ended the run before it (an abort, a timeout,
a crash, a lost lease, a budget). ``refusal`` checks Tether's own messages; the fake OpenAI
server checks the wire with ``chat_refusal`` and ``responses_refusal``, with OpenAI's texts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tether.messages import Message, ToolResultPart

__all__ = ("chat_refusal", "refusal", "responses_refusal")


def refusal(messages: Sequence[Message]) -> str | None:
    """Why a provider would refuse ``messages`` (a transcript or a model request's messages),
    or ``None`` if it would take them."""
    turns: list[tuple[str, list[str]]] = []
    for message in messages:
        if message.role == "assistant":
            turns.append(("calls", [part.call_id for part in message.tool_calls]))
        elif message.role == "tool":
            turns.append(
                ("results", [p.call_id for p in message.parts if isinstance(p, ToolResultPart)])
            )
        else:
            turns.append(("other", []))
    return _check(turns)


def chat_refusal(messages: Iterable[dict[str, Any]]) -> str | None:
    """The Chat Completions API's 400 for ``messages`` (as sent), or ``None``."""
    turns: list[tuple[str, list[str]]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            turns.append(("calls", [call["id"] for call in message.get("tool_calls") or ()]))
        elif role == "tool":
            turns.append(("results", [str(message.get("tool_call_id"))]))
        else:
            turns.append(("other", []))
    return _check(turns)


def responses_refusal(items: Iterable[Any]) -> str | None:
    """The Responses API's 400 for an ``input`` list (as sent), or ``None``: every
    ``function_call`` needs its ``function_call_output`` (the API does not insist on the order
    Chat Completions does, but on the pairing)."""
    called: dict[str, None] = {}
    answered: set[str] = set()
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            called[str(item.get("call_id"))] = None
        elif item.get("type") == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in called:
                return f"No tool call found for function call output with call_id {call_id}."
            answered.add(call_id)
    missing = [call_id for call_id in called if call_id not in answered]
    if missing:
        return f"No tool output found for function call {missing[0]}."
    return None


def _check(turns: list[tuple[str, list[str]]]) -> str | None:
    """OpenAI's rules, which Anthropic's match: the results of an assistant message's calls
    come right after it, one per call, before anything else."""
    waiting: list[str] = []  # the calls of the last assistant message still unanswered
    for kind, ids in turns:
        if kind == "results":
            for call_id in ids:
                if call_id not in waiting:
                    return (
                        "Invalid parameter: messages with role 'tool' must be a response to a "
                        f"preceding message with 'tool_calls' (tool_call_id {call_id})."
                    )
                waiting.remove(call_id)
            continue
        if waiting:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(waiting)}"
            )
        waiting = list(ids) if kind == "calls" else []
    if waiting:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(waiting)}"
        )
    return None
