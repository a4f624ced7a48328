"""Agent versions: which versions of each agent this process runs, the one new runs start on,
the digest that names a version nobody named, and the pins an execution records.

A version is what a deploy ships for one agent. A run records the version it started on
(the store stamps it with the claim that starts it), so a worker knows which runs it can
take: under the ``pinned`` policy only runs of the versions it serves, under ``upgrade``
any (docs/versions.md)."""

from __future__ import annotations

import logging
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tether._canonical import canonical_json, sha256_hex
from tether._wire import JsonObject
from tether.engine._agents import AgentDefinition, AgentSpec, VersionPolicy, build_spec

__all__ = (
    "PROBE_INSTANCE",
    "VERSION_DIVERGED",
    "AgentVersion",
    "AgentVersions",
    "flatten_versions",
    "pins_of",
    "version_digest",
)

logger = logging.getLogger("tether.engine")

PROBE_INSTANCE = "version-probe"
"""The instance a definition's initializer is asked for once at start, to name a version
that was given no name: what it builds is what the version pins."""


VERSION_DIVERGED = "version_diverged"
"""The wait of a run whose code no longer makes its recorded effects: it waits for a worker
whose code can go on (a deploy with a patch), and is woken when one starts."""

_PINS_KEPT = 64


def pins_of(spec: AgentSpec) -> JsonObject:
    """What identifies an agent's behaviour to its journal: the harness's name and version,
    and what the harness says pins it (the built-in agent: a digest of its system prompt,
    of each tool's schema, of its settings, and its model's name)."""
    harness = spec.harness
    pins: JsonObject = {"harness": f"{harness.name}@{harness.version}"}
    own = getattr(harness, "pins", None)
    if callable(own):
        pins.update(own())
    return pins


def version_digest(pins: JsonObject) -> str:
    """The default name of a version: twelve hex digits of the digest of its pins."""
    return sha256_hex(canonical_json(pins))[:12]


def _code_digest(initialize: Callable[..., Any]) -> str:
    """A version's name when its initializer cannot be probed (it needs a real instance):
    a digest of the initializer's code, its constants and the names it reads, less the line
    numbers (an edit elsewhere in its file changes nothing)."""
    target: Any = initialize
    code = getattr(target, "__code__", None)
    if code is None:
        target = type(target).__call__  # a callable object: its method's code
        code = getattr(target, "__code__", None)
    parts: list[str] = [getattr(target, "__module__", ""), getattr(target, "__qualname__", "")]

    def walk(code: types.CodeType) -> None:
        parts.append(code.co_code.hex())
        parts.extend(code.co_names)
        for constant in code.co_consts:
            if isinstance(constant, types.CodeType):
                walk(constant)
            else:
                parts.append(repr(constant))

    if isinstance(code, types.CodeType):
        walk(code)
    return sha256_hex("\0".join(parts).encode())[:12]


@dataclass(frozen=True, slots=True)
class AgentVersion:
    """One version of one agent this process runs: its name, its definition, and the pins
    its probe built (``None`` for a version named by hand, or by its code)."""

    agent: str
    version: str
    definition: AgentDefinition
    pins: JsonObject | None = None


def flatten_versions(
    name: str, given: AgentDefinition | Mapping[str, AgentDefinition]
) -> list[AgentDefinition]:
    """An agent's definitions, newest first: ``{"v1": d1, "v2": d2}`` (the last is newest,
    each named by its key) or a definition and its ``previous``. A name given twice, or a
    definition whose ``version`` disagrees with its key, is refused."""
    if isinstance(given, AgentDefinition):
        definitions = [given, *given.previous]
    elif isinstance(given, Mapping):
        definitions = []
        for version, definition in reversed(list(given.items())):
            if not isinstance(definition, AgentDefinition):
                raise TypeError(
                    f"agents[{name!r}][{version!r}] must be an AgentDefinition, "
                    f"got {type(definition).__name__}"
                )
            if definition.version not in (None, version):
                raise ValueError(
                    f"agents[{name!r}][{version!r}] is named version {definition.version!r}"
                )
            definitions.append(replace(definition, version=version))
        if not definitions:
            raise ValueError(f"agents[{name!r}] names no version")
    else:
        raise TypeError(
            f"agents[{name!r}] must be an AgentDefinition or a mapping of versions to "
            f"AgentDefinition, got {type(given).__name__}"
        )
    for definition in definitions:
        if not isinstance(definition, AgentDefinition):
            raise TypeError(
                f"agents[{name!r}].previous must hold AgentDefinition, "
                f"got {type(definition).__name__}"
            )
    named = [d.version for d in definitions if d.version is not None]
    if len(named) != len(set(named)):
        raise ValueError(f"agents[{name!r}] names a version twice: {named}")
    return definitions


class AgentVersions:
    """The versions of each agent this process runs, newest first.

    Example::

        versions = await AgentVersions.resolve({"assistant": definition}, env={})
        versions.newest("assistant").version   # 'a1b2c3d4e5f6', its pins' digest
        versions.serves()                      # {'assistant': ('a1b2c3d4e5f6',)}
    """

    def __init__(self, by_agent: Mapping[str, Sequence[AgentVersion]]) -> None:
        self._by_agent = {name: tuple(versions) for name, versions in by_agent.items()}
        self._index = {
            (name, v.version): v for name, versions in self._by_agent.items() for v in versions
        }
        self._pins: dict[int, tuple[AgentSpec, JsonObject]] = {}

    @classmethod
    async def resolve(
        cls,
        agents: Mapping[str, Sequence[AgentDefinition]],
        env: Mapping[str, str],
    ) -> AgentVersions:
        """Name every version: a definition without a ``version`` is probed (its initializer
        asked once for ``PROBE_INSTANCE``; one named by hand is not) and named by the digest
        of its pins; one whose initializer refuses the probe is named by the digest of its
        code. Two definitions that come out the same name are one version given twice,
        refused."""
        by_agent: dict[str, list[AgentVersion]] = {}
        for name, definitions in agents.items():
            resolved: list[AgentVersion] = []
            for definition in definitions:
                version, pins = definition.version, None
                if version is None:
                    pins = await _probe(name, definition, env)
                    version = (
                        version_digest(pins)
                        if pins is not None
                        else _code_digest(definition.initialize)
                    )
                if any(v.version == version for v in resolved):
                    raise ValueError(
                        f"agents[{name!r}]: two definitions are version {version!r}; "
                        "name them apart with version="
                    )
                resolved.append(AgentVersion(name, version, definition, pins))
            by_agent[name] = resolved
        return cls(by_agent)

    def pins_for(self, spec: AgentSpec) -> JsonObject:
        """:func:`pins_of` ``spec``, remembered for the specs seen last: an initializer that
        returns the same spec on every claim has it digested once."""
        kept = self._pins.get(id(spec))
        if kept is not None and kept[0] is spec:
            return kept[1]
        pins = pins_of(spec)
        if len(self._pins) >= _PINS_KEPT:
            self._pins.pop(next(iter(self._pins)))
        self._pins[id(spec)] = (spec, pins)
        return pins

    def agents(self) -> list[str]:
        return list(self._by_agent)

    def of(self, agent: str) -> tuple[AgentVersion, ...]:
        """The versions of ``agent`` this process runs, newest first (none if unknown)."""
        return self._by_agent.get(agent, ())

    def newest(self, agent: str) -> AgentVersion | None:
        versions = self._by_agent.get(agent)
        return versions[0] if versions else None

    def find(self, agent: str, version: str | None) -> AgentVersion | None:
        return None if version is None else self._index.get((agent, version))

    def policy(self, agent: str) -> VersionPolicy:
        """The agent's policy: its newest definition's."""
        newest = self.newest(agent)
        return "pinned" if newest is None else newest.definition.policy

    def for_run(self, agent: str, version: str | None) -> AgentVersion | None:
        """The version a claimed run runs on: its own when this process serves it, else the
        newest (a run the claim upgraded, or one started before versions existed)."""
        return self.find(agent, version) or self.newest(agent)

    def serves(self) -> dict[str, tuple[str, ...]]:
        """What the claims of this process may take, per agent: its versions newest first,
        and ``"*"`` (any version, which the claim re-stamps to the newest) under ``upgrade``."""
        served: dict[str, tuple[str, ...]] = {}
        for name, versions in self._by_agent.items():
            names = tuple(v.version for v in versions)
            served[name] = (*names, "*") if self.policy(name) == "upgrade" else names
        return served


async def _probe(
    name: str, definition: AgentDefinition, env: Mapping[str, str]
) -> JsonObject | None:
    try:
        spec = await build_spec(definition, name, PROBE_INSTANCE, env)
    except Exception as exc:  # an initializer that needs a real instance: named by its code
        logger.info(
            "agent %s: its initializer refused the version probe (%s: %s); its version is "
            "named by its code (give version= to name it yourself)",
            name,
            type(exc).__name__,
            exc,
        )
        return None
    return pins_of(spec)
