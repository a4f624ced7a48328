"""``App``: everything an application serves, as one object (``tether serve --app``,
``tether worker --app`` and :meth:`Runtime.from_app` read the same one).

It holds what :class:`Runtime` takes (the agents, the store, a :class:`RuntimeConfig` or its
fields, observers and interceptors) and what the HTTP server takes beside it (the
authenticate and authorize hooks), so what a test builds with ``Runtime.from_app(app)`` is
what ``tether serve --app myapp:app`` runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tether.engine._agents import AgentDefinition
from tether.engine._config import RuntimeConfig
from tether.engine._observe import Interceptor, Observer

__all__ = ("App", "AppAgents")

AppAgents = Mapping[str, AgentDefinition | Mapping[str, AgentDefinition]]
"""Each agent's definition, or its versions ``{version: definition}`` (the last newest), as
:class:`Runtime` takes them."""


class App:
    """An application: its agents and everything the runtime and the server run them with.

    ``agents`` and ``store`` are :class:`Runtime`'s; ``config`` and ``**settings`` (any
    :class:`RuntimeConfig` field: ``subagents``, ``subagent_limits``, ``redact``,
    ``schedules``, ``retention``, ``lease``, ``tenant_of``...) are merged as Runtime merges
    them. ``env`` is what every initializer gets as its second argument (any ``Mapping``: a
    secrets manager's, read on demand, will do); ``None``, the default, is the process
    environment, read when the runtime is built. ``authenticate`` and ``authorize`` are
    ``tether.http.create_app``'s hooks (docs/auth.md), used by ``tether serve`` unless its
    own auth options say otherwise. ``store`` is a URL (or ``None``: the serving command's
    ``--store``, else its default). Options given to ``tether serve`` (by flag, ``TETHER_*``
    variable or ``tether.toml``) override what the App says.

    Example::

        app = App(
            {"assistant": AgentDefinition(assistant), "researcher": AgentDefinition(researcher)},
            store="sqlite:///./tether-data",
            subagents={"assistant": ["researcher"]},
            schedules=[Schedule("assistant", "ops", body="daily report", cron="0 9 * * *")],
        )
        # tether serve --app myapp:app, or in a test:
        async with Runtime.from_app(app) as runtime:
            ...
    """

    def __init__(
        self,
        agents: AppAgents,
        store: str | None = None,
        *,
        config: RuntimeConfig | None = None,
        env: Mapping[str, str] | None = None,
        observers: Sequence[Observer] = (),
        interceptors: Sequence[Interceptor] = (),
        authenticate: Callable[..., Any] | None = None,
        authorize: Callable[..., Any] | None = None,
        **settings: Any,
    ) -> None:
        if not isinstance(agents, Mapping):
            raise TypeError(
                "agents must be a mapping of agent names to AgentDefinition, "
                f"got {type(agents).__name__}"
            )
        if store is not None and not isinstance(store, str):
            raise TypeError(f"store must be a store URL, got {type(store).__name__}")
        for name, hook in (("authenticate", authenticate), ("authorize", authorize)):
            if hook is not None and not callable(hook):
                raise TypeError(f"{name} must be a function, got {type(hook).__name__}")
        self.agents: AppAgents = agents
        self.store = store
        self.config = replace(config or RuntimeConfig(), **settings)
        """The engine settings (``config`` with ``**settings`` applied)."""
        self.env = env
        self.observers = tuple(observers)
        self.interceptors = tuple(interceptors)
        self.authenticate = authenticate
        self.authorize = authorize

    def runtime_config(self, **overrides: Any) -> RuntimeConfig:
        """The :class:`RuntimeConfig` a runtime of this App runs with: :attr:`config`, its
        ``env`` the App's (the process environment if none was given), then ``overrides``."""
        env = self.env if self.env is not None else self.config.env or dict(os.environ)
        return replace(self.config, env=env, **overrides)

    def merged(self, other: App) -> App:
        """This App with ``other``'s agents and delegation policy added (``--demo`` beside
        ``--app``); everything else is this App's."""
        subagents = {**self.config.subagents}
        for name, allowed in other.config.subagents.items():
            subagents[name] = [*subagents.get(name, ()), *allowed]
        return App(
            {**self.agents, **other.agents},
            self.store,
            config=replace(self.config, subagents=subagents),
            env=self.env,
            observers=self.observers,
            interceptors=self.interceptors,
            authenticate=self.authenticate,
            authorize=self.authorize,
        )

    def __repr__(self) -> str:
        return f"App(agents={list(self.agents)!r}, store={self.store!r})"
