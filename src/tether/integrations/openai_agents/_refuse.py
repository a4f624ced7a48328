"""What a durable run cannot journal, refused when the agent is registered (or, for an agent
only a nested run names, when that run starts) rather than left to run twice."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from agents import (
    Agent,
    ApplyPatchTool,
    ComputerTool,
    CustomTool,
    HostedMCPTool,
    LocalShellTool,
    ShellTool,
    Tool,
    ToolSearchTool,
)
from agents.sandbox import SandboxAgent

from tether import errors

__all__ = ("UnsupportedConstruct", "check_agent", "check_run_options", "server_state")

_LOCAL_TOOLS: tuple[type[Any], ...] = (
    ComputerTool,
    LocalShellTool,
    ApplyPatchTool,
    CustomTool,
)


class UnsupportedConstruct(errors.UnsupportedConstruct):
    """An Agents SDK construct whose effects a durable run cannot journal.

    Raised by ``durable()`` / ``journaled_agent()`` when the agent (or an agent it hands off
    to) has one, and when a run nested in a durable run (a guardrail's checker agent) does:
    replay or resume would otherwise repeat the effect, or the run would depend on state the
    Tether log does not hold.

    Example::

        try:
            durable(Agent(name="a", tools=[LocalShellTool(executor=run)]))
        except UnsupportedConstruct as exc:
            print(exc)   # agent 'a': tool 'local_shell': ...
    """


_AGAIN = (
    "(a replay or a resume would run it again); wrap the action in a function_tool, which "
    "is journaled"
)


def _tool_problem(tool: Tool) -> str | None:
    if isinstance(tool, ShellTool):
        if tool.executor is None:
            return None  # a hosted shell runs at the provider, inside the journaled model call
        return f"a local ShellTool runs commands on this machine outside the journal {_AGAIN}"
    if isinstance(tool, _LOCAL_TOOLS):
        return f"{type(tool).__name__} runs on this machine outside the journal {_AGAIN}"
    if isinstance(tool, HostedMCPTool):
        approval = tool.tool_config.get("require_approval")
        if approval != "never" and tool.on_approval_request is None:
            return (
                "a HostedMCPTool that may require approval stops the run for the SDK's own "
                "approval flow, which a durable run cannot park on; set "
                "require_approval='never' or give it an on_approval_request callback"
            )
        return None
    if isinstance(tool, ToolSearchTool) and tool.execution == "client":
        return (
            "a client-executed ToolSearchTool is not run by the SDK's runner; use "
            "execution='server'"
        )
    return None


def check_agent(agent: Agent[Any]) -> None:
    """Raise :class:`UnsupportedConstruct` for what ``agent`` itself has (not its handoffs)."""
    where = f"agent {agent.name!r}"
    if isinstance(agent, SandboxAgent):
        raise UnsupportedConstruct(
            f"{where}: a SandboxAgent runs commands and file edits in a sandbox session "
            "outside the journal (a replay or a resume would repeat them)"
        )
    for tool in agent.tools:
        problem = _tool_problem(tool)
        if problem is not None:
            name = getattr(tool, "name", type(tool).__name__)
            raise UnsupportedConstruct(f"{where}: tool {name!r}: {problem}")


def check_run_options(
    options: dict[str, Any], input: object, responses: Collection[str] = ()
) -> None:
    """Refuse the run options that put the conversation somewhere the journal cannot see.
    ``responses``: the ids of the responses journaled so far in the enclosing run, which a
    ``previous_response_id`` may name (the journal holds what they continue)."""
    if options.get("session") is not None:
        raise UnsupportedConstruct(
            "session=: a durable run's memory is its Tether session log (every submission "
            "to a session sees its transcript, across restarts, forks and replays); an SDK "
            "Session, a TetherSession included, would be a second memory the journal does "
            "not hold (read live, written again on replay). Drop session= and dispatch to "
            "a Tether session instead (runtime.dispatch(..., session=...), "
            'POST /agents/{agent}/{instance} with {"session": ...}); TetherSession is for '
            "Runner.run outside a durable agent"
        )
    if options.get("conversation_id"):
        raise server_state("conversation_id", options["conversation_id"])
    previous = options.get("previous_response_id")
    if previous and previous not in responses:
        raise server_state("previous_response_id", previous)
    if type(input).__name__ == "RunState":
        raise UnsupportedConstruct(
            "a RunState resumes the SDK's own interruptions; a durable run parks for Tether "
            "approvals instead and resumes from its log"
        )


def server_state(option: str, value: object) -> UnsupportedConstruct:
    """The refusal of a conversation kept at the provider that the journal does not hold."""
    if option == "conversation_id":
        return UnsupportedConstruct(
            f"conversation_id={value!r}: a conversation object kept by the provider is not "
            "in the journal, so a resume or a replay would depend on the provider still "
            "holding it; a durable run sends its history from the Tether log"
        )
    return UnsupportedConstruct(
        f"previous_response_id={value!r} names no response of this durable run: the history "
        "it continues is held by the provider only, so a resume or a replay would depend on "
        "the provider still holding it. Chain only the run's own responses "
        "(auto_previous_response_id=True, or a response id this run returned), which the "
        "journal resolves from its log"
    )
