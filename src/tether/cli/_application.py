"""What ``--app module:attr`` names: a :class:`tether.App`, a factory returning one, or (as
before there was an App) the agents alone, ``{name: AgentDefinition}`` or
``{name: {version: AgentDefinition}}``; and ``--demo``'s App. Whatever cannot be loaded
exits with one line and :attr:`ExitCode.BAD_APP`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import typer

from tether.cli._exit import ExitCode, describe, fail
from tether.cli._imports import import_attribute

if TYPE_CHECKING:
    from tether.engine import AgentDefinition, App, AppAgents

# The engine is imported by the commands that load an app, never at import: ``tether --help``
# and the client commands load this module too.

__all__ = ("load_agents", "load_app", "newest_definitions")


def load_app(app: str | None, demo: bool, *, option: str = "--app") -> App:
    """The App ``--app module:attr`` names and/or the keyless demo's (its agents and
    delegation policy added to the App's)."""
    from tether.engine import App

    loaded = _load_app(app, option) if app is not None else None
    if demo:
        from tether.demo import demo_agents, demo_subagents

        demo_app = App(demo_agents(), env={}, subagents=demo_subagents())
        loaded = demo_app if loaded is None else loaded.merged(demo_app)
    if loaded is None or not loaded.agents:
        raise typer.BadParameter("give --demo or --app module:factory")
    return loaded


def load_agents(app: str | None, demo: bool, *, option: str = "--app") -> AppAgents:
    """The agents of :func:`load_app`'s App (for a command that runs no server: a replay,
    the deploy gate)."""
    return load_app(app, demo, option=option).agents


def newest_definitions(agents: AppAgents) -> dict[str, AgentDefinition]:
    """Each agent's newest definition (the last of its versions), for a command that runs
    one version: a replay of one conversation."""
    newest: dict[str, AgentDefinition] = {}
    for name, given in agents.items():
        newest[name] = given if not isinstance(given, Mapping) else list(given.values())[-1]
    return newest


def _load_app(app: str, option: str) -> App:
    """The App ``module:attr`` names; exits with :attr:`ExitCode.BAD_APP` if it cannot."""
    from tether.engine import AgentDefinition, App

    target = import_attribute(app, option, "myapp:app")
    attribute = app.partition(":")[2]
    try:
        loaded = target() if callable(target) and not isinstance(target, App) else target
    except Exception as exc:
        fail(f"{option} {app}: {attribute}() failed: {describe(exc)}", ExitCode.BAD_APP)
    agents: Mapping[str, Any]
    if isinstance(loaded, App):
        agents = loaded.agents
    elif isinstance(loaded, Mapping):
        agents = loaded
    else:
        fail(
            f"{option} {app}: expected a tether.App or {{name: AgentDefinition}}, "
            f"got {type(loaded).__name__}",
            ExitCode.BAD_APP,
        )
    for name, given in agents.items():
        versions = given if isinstance(given, Mapping) else {None: given}
        if not versions:
            fail(f"{option} {app}: agents[{name!r}] names no version", ExitCode.BAD_APP)
        for version, definition in versions.items():
            if not isinstance(definition, AgentDefinition):
                where = f"agents[{name!r}]" + ("" if version is None else f"[{version!r}]")
                fail(
                    f"{option} {app}: {where} must be an AgentDefinition, "
                    f"got {type(definition).__name__}",
                    ExitCode.BAD_APP,
                )
    # Agents alone run as they always did: their initializers get an empty env.
    return loaded if isinstance(loaded, App) else App(agents, env={})
