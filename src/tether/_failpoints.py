"""Failpoints: named places in Tether where a test makes a fault happen on purpose.

A failpoint is a name (``store.append``, ``model.request``, ``sqlite.commit``, ...: the list is
:data:`POINTS`) armed with an action (``error``, ``delay(seconds)``, ``crash``, ``hang`` or
``off``) and a trigger (``always``, ``once``, ``every(N)``, ``nth(N)`` or a probability drawn
from a seeded generator). They are armed from ``TETHER_FAILPOINTS`` when a runtime starts, or
by :func:`tether.testing.failpoints`; nothing is armed otherwise, and then no call site pays
more than the truth test of :data:`ARMED` (the store and the model and tool clients are wrapped
only while something is armed when the runtime starts, or its attempt does).

The grammar of ``TETHER_FAILPOINTS`` (whitespace around every token is ignored)::

    spec     := [entry] (";" [entry])*
    entry    := pattern "=" action
    pattern  := name | prefix "*"           a name of POINTS, or every name a prefix begins
    action   := "error" [ "(" trigger ")" ]
              | "crash" [ "(" trigger ")" ]
              | "hang"  [ "(" trigger ")" ]
              | "delay" "(" seconds [ "," trigger ] ")"
              | "off"
    trigger  := "always" | "once" | "every(" N ")" | "nth(" N ")" | probability
    seconds  := a decimal >= 0;  N := an integer >= 1;  probability := a decimal in (0, 1]

``once`` is ``nth(1)``: only the first hit fires; ``nth(N)`` only the Nth; ``every(N)`` the
Nth, the 2Nth, ...; a probability fires each hit with that chance, drawn from a generator
seeded by ``TETHER_FAILPOINTS_SEED`` (default 0) and the pattern, so a run replays. A
pattern's hits are counted across every point it matches: ``store.*=error(nth(7))`` fails the
seventh store call, whichever it is. The first entry that matches a point is the one it hits.

Example::

    TETHER_FAILPOINTS="store.append=error(0.05); store.claim=crash(once); model.request=delay(2)"
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tether.errors import FailpointSpecInvalid

__all__ = (
    "ARMED",
    "ENVIRONMENT_VARIABLE",
    "POINTS",
    "SEED_VARIABLE",
    "Action",
    "Failpoint",
    "Trigger",
    "arm",
    "arm_from_environment",
    "crash_now",
    "disarm",
    "hit",
    "hit_sync",
    "parse_failpoints",
)

ENVIRONMENT_VARIABLE = "TETHER_FAILPOINTS"
SEED_VARIABLE = "TETHER_FAILPOINTS_SEED"

STORE_POINTS = (
    "store.acquire_limit",
    "store.admit",
    "store.admit_and_claim",
    "store.append",
    "store.append_decision",
    "store.append_settled",
    "store.append_spending",
    "store.claim",
    "store.claim_runnable",
    "store.claim_webhook_deliveries",
    "store.dead_owners",
    "store.delete_memory",
    "store.delete_schedule",
    "store.ensure_conversation",
    "store.erase_memory",
    "store.erase_session",
    "store.finalize_settlement",
    "store.find_conversation",
    "store.find_token",
    "store.finish_webhook_attempt",
    "store.forget_owner",
    "store.forget_webhook_deliveries",
    "store.forget_worker",
    "store.fork",
    "store.get_attachment",
    "store.get_conversation",
    "store.get_memory",
    "store.get_snapshot",
    "store.get_submission",
    "store.get_webhook_delivery",
    "store.head",
    "store.hold_liveness",
    "store.import_conversation",
    "store.lease_usage",
    "store.limit_slots",
    "store.list_attempts",
    "store.list_children",
    "store.list_expired_leases",
    "store.list_expired_waits",
    "store.list_gates",
    "store.list_memory",
    "store.list_runnable",
    "store.list_schedules",
    "store.list_sessions",
    "store.list_submissions",
    "store.list_tokens",
    "store.list_webhook_deliveries",
    "store.list_workers",
    "store.memory_namespaces",
    "store.mint_fence",
    "store.next_due",
    "store.park",
    "store.patch_session_metadata",
    "store.pause_limit",
    "store.ping",
    "store.put_attachment",
    "store.put_memory",
    "store.put_schedule",
    "store.put_snapshot",
    "store.put_token",
    "store.put_webhook_deliveries",
    "store.put_worker",
    "store.read",
    "store.release",
    "store.release_due",
    "store.release_limit",
    "store.release_liveness",
    "store.release_owner_limits",
    "store.release_usage",
    "store.release_webhook_delivery",
    "store.renew_lease",
    "store.renew_limits",
    "store.renew_usage",
    "store.request_cancel",
    "store.resend_webhook_delivery",
    "store.reserve_settlement",
    "store.reserve_usage",
    "store.revoke_token",
    "store.search_memory",
    "store.set_version",
    "store.settle_absorbed",
    "store.spend_limit",
    "store.tenant_usage",
    "store.truncate_log",
    "store.unpark",
    "store.verify",
    "store.version_counts",
    "store.wait_for_append",
)
"""A point for every operation of the store protocols (``tests/store/test_failpoints.py``
checks the list against them): the runtime's store is wrapped, so they fire for any backend."""

POINTS: frozenset[str] = frozenset(
    (
        *STORE_POINTS,
        "sqlite.commit",  # the SQLite writer, just before its COMMIT (on its thread or inline)
        "model.request",  # every model call an attempt makes, inside its instrumentation
        "tool.call",  # every host-mediated tool call an attempt makes
        "sse.send",  # every chunk of a session's event stream, before it is sent
    )
)
"""Every failpoint's name."""

Action = Literal["error", "delay", "crash", "hang", "off"]
TriggerKind = Literal["always", "nth", "every", "probability"]


@dataclass(frozen=True, slots=True)
class Trigger:
    """When an armed failpoint fires: ``always``; the ``nth`` hit only (``once`` is
    ``nth`` 1); ``every`` Nth hit; or with ``probability``."""

    kind: TriggerKind = "always"
    n: int = 1
    probability: float = 1.0

    def __str__(self) -> str:
        if self.kind == "always":
            return "always"
        if self.kind == "probability":
            return f"{self.probability:g}"
        if self.kind == "nth" and self.n == 1:
            return "once"
        return f"{self.kind}({self.n})"


@dataclass(slots=True)
class Failpoint:
    """One armed entry: the points its ``pattern`` matches, its ``action`` (and ``seconds``
    of a delay), its ``trigger``; ``hits`` counts the calls that reached it and ``fired``
    those it acted on.

    Example::

        (point,) = parse_failpoints("store.append=error(nth(3))")
        point.matches("store.append")  # True
    """

    pattern: str
    action: Action
    trigger: Trigger = field(default_factory=Trigger)
    seconds: float = 0.0
    seed: int = 0
    hits: int = 0
    fired: int = 0
    _random: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._random = random.Random(f"{self.seed}:{self.pattern}")

    def matches(self, name: str) -> bool:
        if self.pattern.endswith("*"):
            return name.startswith(self.pattern[:-1])
        return name == self.pattern

    def fires(self) -> bool:
        """Count a hit and say whether it acts (thread-safe: the SQLite writer hits too)."""
        with self._lock:
            self.hits += 1
            trigger = self.trigger
            if self.action == "off":
                due = False
            elif trigger.kind == "always":
                due = True
            elif trigger.kind == "nth":
                due = self.hits == trigger.n
            elif trigger.kind == "every":
                due = self.hits % trigger.n == 0
            else:
                due = self._random.random() < trigger.probability
            if due:
                self.fired += 1
            return due

    def __str__(self) -> str:
        if self.action == "off":
            return f"{self.pattern}=off"
        if self.action == "delay":
            suffix = "" if self.trigger.kind == "always" else f", {self.trigger}"
            return f"{self.pattern}=delay({self.seconds:g}{suffix})"
        suffix = "" if self.trigger.kind == "always" else f"({self.trigger})"
        return f"{self.pattern}={self.action}{suffix}"


ARMED: list[Failpoint] = []
"""What is armed, in the order entries match. Call sites test its truth before anything
else: while it is empty a failpoint costs that test alone. Changed in place only."""

# The spec armed from the environment, and its entries (armed after any a test arms).
_from_environment: list[Any] = [None, []]


# --- the grammar ---------------------------------------------------------------------------

_PATTERN = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*(\.?\*)?|\*")
_CALL = re.compile(r"(?P<name>[a-z]+)\s*(\((?P<args>.*)\))?", re.DOTALL)
_INTEGER = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")


def _invalid(spec: str, entry: str, reason: str) -> FailpointSpecInvalid:
    return FailpointSpecInvalid(spec, entry, reason)


def _trigger(text: str, spec: str, entry: str) -> Trigger:
    text = text.strip()
    if text in ("", "always"):
        return Trigger()
    if text == "once":
        return Trigger("nth", 1)
    call = _CALL.fullmatch(text)
    if call is not None and call["name"] in ("every", "nth"):
        count = (call["args"] or "").strip()
        if not _INTEGER.fullmatch(count) or int(count) < 1:
            raise _invalid(spec, entry, f"{call['name']}(N) needs an integer N >= 1")
        kind: TriggerKind = "every" if call["name"] == "every" else "nth"
        return Trigger(kind, int(count))
    if _DECIMAL.fullmatch(text):
        probability = float(text)
        if not 0 < probability <= 1:
            raise _invalid(spec, entry, f"a probability is in (0, 1], not {text}")
        return Trigger() if probability == 1 else Trigger("probability", probability=probability)
    raise _invalid(
        spec,
        entry,
        f"unknown trigger {text!r}: always, once, every(N), nth(N) or a probability",
    )


def _entry(text: str, spec: str, seed: int) -> Failpoint:
    pattern, equals, action_text = text.partition("=")
    pattern, action_text = pattern.strip(), action_text.strip()
    if not equals:
        raise _invalid(spec, text, "an entry is point=action")
    if not _PATTERN.fullmatch(pattern):
        raise _invalid(spec, text, f"{pattern!r} is not a point name or a prefix ending in *")
    if pattern.endswith("*"):
        if not any(name.startswith(pattern[:-1]) for name in POINTS):
            raise _invalid(spec, text, f"no failpoint begins {pattern[:-1]!r}")
    elif pattern not in POINTS:
        near = sorted(n for n in POINTS if n.split(".")[0] == pattern.split(".")[0])[:8]
        hint = f" (known: {', '.join(near)}, ...)" if near else ""
        raise _invalid(spec, text, f"unknown failpoint {pattern!r}{hint}")
    call = _CALL.fullmatch(action_text)
    if call is None:
        raise _invalid(spec, text, f"cannot read the action {action_text!r}")
    name, args = call["name"], call["args"]
    if name == "off":
        if args is not None:
            raise _invalid(spec, text, "off takes no argument")
        return Failpoint(pattern, "off", seed=seed)
    if name == "delay":
        seconds, _, trigger = (args or "").partition(",")
        seconds = seconds.strip()
        if not _DECIMAL.fullmatch(seconds):
            raise _invalid(spec, text, "delay(seconds) needs its seconds, a decimal >= 0")
        return Failpoint(
            pattern, "delay", _trigger(trigger, spec, text), seconds=float(seconds), seed=seed
        )
    if name in ("error", "crash", "hang"):
        action: Action = name  # type: ignore[assignment]
        return Failpoint(pattern, action, _trigger(args or "", spec, text), seed=seed)
    raise _invalid(spec, text, f"unknown action {name!r}: error, delay, crash, hang or off")


def parse_failpoints(spec: str, *, seed: int = 0) -> tuple[Failpoint, ...]:
    """The entries of a ``TETHER_FAILPOINTS`` value, or :class:`FailpointSpecInvalid`
    naming the entry and what is wrong with it.

    Example::

        parse_failpoints("store.append=error(0.05); store.claim=crash(once)")
    """
    return tuple(_entry(text, spec, seed) for text in spec.split(";") if text.strip())


# --- arming --------------------------------------------------------------------------------


def arm(points: Iterable[Failpoint]) -> None:
    """Arm ``points`` ahead of what is armed already (the first entry that matches wins)."""
    ARMED[:0] = list(points)


def disarm(points: Iterable[Failpoint] | None = None) -> None:
    """Disarm ``points``, or everything."""
    if points is None:
        ARMED.clear()
        _from_environment[:] = [None, []]
        return
    gone = {id(point) for point in points}
    ARMED[:] = [point for point in ARMED if id(point) not in gone]


def arm_from_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Arm what ``TETHER_FAILPOINTS`` says (once per value: a second runtime in the process
    keeps the counts) and say whether it is set at all, even empty. A value that does not
    parse raises :class:`FailpointSpecInvalid`; a seed that is no integer too."""
    environ = os.environ if environ is None else environ
    spec = environ.get(ENVIRONMENT_VARIABLE)
    if spec is None:
        return False
    if _from_environment[0] == spec:
        return True
    seed_text = environ.get(SEED_VARIABLE, "0").strip() or "0"
    if not re.fullmatch(r"-?[0-9]+", seed_text):
        raise _invalid(spec, f"{SEED_VARIABLE}={seed_text}", "the seed is an integer")
    points = parse_failpoints(spec, seed=int(seed_text))
    disarm(_from_environment[1])
    ARMED.extend(points)
    _from_environment[:] = [spec, list(points)]
    return True


# --- hitting -------------------------------------------------------------------------------


def _armed_for(name: str) -> Failpoint | None:
    for point in ARMED:
        if point.matches(name):
            return point
    return None


def crash_now() -> None:
    """End the process at once, as SIGKILL does: no ``finally``, no flush, no exit handler."""
    kill = getattr(signal, "SIGKILL", None)
    if kill is not None:
        os.kill(os.getpid(), kill)
    os._exit(137)  # pragma: no cover - where there is no SIGKILL


async def hit(
    name: str,
    *,
    error: Callable[[str], BaseException],
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> None:
    """Where an async call site reaches failpoint ``name``: nothing, unless one armed
    fires; then ``error(name)`` raised, a delay slept on ``sleep`` (the engine's clock),
    the process killed, or a wait that only cancellation ends."""
    point = _armed_for(name)
    if point is None or not point.fires():
        return
    if point.action == "error":
        raise error(name)
    if point.action == "delay":
        await (sleep or asyncio.sleep)(point.seconds)
    elif point.action == "crash":
        crash_now()
    elif point.action == "hang":
        await asyncio.get_running_loop().create_future()


def hit_sync(name: str, *, error: Callable[[str], BaseException]) -> None:
    """:func:`hit` for a thread that cannot await (the SQLite writer's): a delay sleeps the
    thread, and a hang never returns."""
    point = _armed_for(name)
    if point is None or not point.fires():
        return
    if point.action == "error":
        raise error(name)
    if point.action == "delay":
        time.sleep(point.seconds)
    elif point.action == "crash":
        crash_now()
    elif point.action == "hang":
        threading.Event().wait()
