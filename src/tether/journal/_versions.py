"""Agent versions as the journal meets them: what a host runs (:class:`Versioning`), what
differs between two versions' pins (:func:`diff_pins`), and the divergence policy one
execution's turn applies (:class:`VersionGuard`, docs/architecture.md §5).

A recorded model call whose input the code now builds differently (I0) is a divergence
unless the log says the code changed after it: a ``version_changed`` record of the
execution at seq S covers every recorded call before S. Under the ``upgrade`` policy a
resume writes that record itself, once per execution, before any new effect; under
``strict`` it raises ``ReplayDiverged`` naming the versions and what differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tether._wire import JsonObject
from tether.records import ExecutionStarted, Record, VersionChanged

__all__ = ("HISTORY", "VersionGuard", "Versioning", "diff_pins", "tolerates_harness")

HISTORY = "history"
"""What differs when the pins agree (or are unknown): the conversation the input is built
from, or code the pins do not cover."""

Policy = Literal["strict", "upgrade"]


@dataclass(frozen=True, slots=True)
class Versioning:
    """The agent version a host runs an execution under, and what to do when a recorded
    execution meets code that builds its model inputs differently.

    ``version`` is the host's name for it; ``pins`` what identifies its behaviour (opaque to
    the journal, compared only to say what changed, see :func:`diff_pins`); ``policy``:
    ``strict`` fails such a resume with ``ReplayDiverged``, ``upgrade`` serves the recorded
    completions and journals a ``version_changed`` record before the first new effect.

    Example::

        versioning = Versioning("v2", pins={"system": digest, "model": "openai:gpt-4.1"},
                                policy="upgrade")
        result = await journal.resume(harness, versioning=versioning)
    """

    version: str | None = None
    pins: JsonObject | None = None
    policy: Policy = "strict"


_WORDS = {"system": "system prompt", "model": "model", "harness": "harness"}
"""The pins' usual keys, in the order their differences are named, and how."""


def diff_pins(recorded: JsonObject | None, current: JsonObject | None) -> tuple[str, ...]:
    """What differs between two versions' pins, in words, most telling first: ``system
    prompt``, ``tool set: +added -removed``, ``tool schema: <name>`` (one per tool whose
    schema changed), ``model``, ``harness``, then any other key that differs by its name.
    ``("history",)`` when they agree or either is unknown: the input changed for a reason
    the pins do not show.

    Example::

        diff_pins({"system": "a1", "tools": {"send": "x"}}, {"system": "b2", "tools": {}})
        # ("system prompt", "tool set: -send")
    """
    if recorded is None or current is None:
        return (HISTORY,)
    words: list[str] = []
    if recorded.get("system") != current.get("system"):
        words.append(_WORDS["system"])
    words.extend(_tool_words(recorded.get("tools"), current.get("tools")))
    for key in ("model", "harness"):
        if recorded.get(key) != current.get(key):
            words.append(_WORDS[key])
    others = sorted((recorded.keys() | current.keys()) - {"system", "tools", "model", "harness"})
    words.extend(key for key in others if recorded.get(key) != current.get(key))
    return tuple(words) or (HISTORY,)


def _tool_words(recorded: object, current: object) -> list[str]:
    if recorded == current:
        return []
    if not isinstance(recorded, dict) or not isinstance(current, dict):
        return ["tools"]  # pins of a shape the journal does not know: say where, not what
    added = sorted(current.keys() - recorded.keys())
    removed = sorted(recorded.keys() - current.keys())
    words = []
    if added or removed:
        changed = [*(f"+{name}" for name in added), *(f"-{name}" for name in removed)]
        words.append("tool set: " + " ".join(changed))
    words.extend(
        f"tool schema: {name}"
        for name in sorted(recorded.keys() & current.keys())
        if recorded[name] != current[name]
    )
    return words


class VersionGuard:
    """The version check of one execution's turn: which recorded model calls may differ
    from what the code asks (those before a ``version_changed`` record of the execution),
    whether a resume under ``upgrade`` journals a change, and what a divergence says about
    the versions.

    ``changes`` are the execution's ``version_changed`` records; ``harness_changed`` says
    the harness serving it is not the one its start recorded.
    """

    def __init__(
        self,
        started: ExecutionStarted,
        versioning: Versioning | None,
        changes: Sequence[Record] = (),
        *,
        harness_changed: bool = False,
    ) -> None:
        self.versioning = versioning
        self.covered_below = max((record.seq for record in changes), default=0)
        """Recorded model calls below this seq may differ: the log says the code changed."""
        latest = changes[-1].payload if changes else None
        self.from_version = (
            latest.to_version if isinstance(latest, VersionChanged) else started.version
        )
        """The version the execution last ran under, as its log says."""
        words = diff_pins(started.pins, None if versioning is None else versioning.pins)
        if harness_changed and "harness" not in words:
            words = ("harness",) if words == (HISTORY,) else (*words, "harness")
        self.differs = words
        self.announced = False
        """Whether this turn already holds (or wrote) a ``version_changed`` of its own."""

    @property
    def to_version(self) -> str | None:
        return None if self.versioning is None else self.versioning.version

    @property
    def upgrading(self) -> bool:
        return self.versioning is not None and self.versioning.policy == "upgrade"

    def covers(self, seq: int) -> bool:
        """Whether the recorded model call at ``seq`` may differ from what the code asks."""
        return seq < self.covered_below

    def announce(self, diverged_at: int | None) -> VersionChanged | None:
        """The ``version_changed`` record a resume under ``upgrade`` holds behind when it
        meets a change (at the recorded model call ``diverged_at``, or in the harness), or
        ``None``: not upgrading, or this turn already announced one."""
        if not self.upgrading or self.announced:
            return None
        self.announced = True
        return VersionChanged(
            from_version=self.from_version,
            to_version=self.to_version,
            reason="upgrade",
            diverged_at=diverged_at,
            differs=self.differs,
        )


def tolerates_harness(changes: Sequence[Record]) -> bool:
    """Whether an execution's ``version_changed`` records say its harness changed: it may
    then be replayed by another harness than its start recorded."""
    return any(
        isinstance(record.payload, VersionChanged) and "harness" in record.payload.differs
        for record in changes
    )
