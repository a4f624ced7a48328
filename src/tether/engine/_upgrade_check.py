"""The deploy gate: recorded sessions replayed against the newest version of their agent, to
say before a deploy which of them the new code would fail (docs/versions.md, "The deploy
gate").

A sample of the sessions index, newest activity first, each checked by ``Journal.check``
(no model call, no tool call, nothing written): its completed executions replayed, and the
pending one (which a run would resume) up to where it waits. A divergence is ``diverged``
when only a model call's input differs (a resume under the ``upgrade`` policy would serve
the recorded answer and journal the change; under ``strict`` it fails) and ``needs_patch``
when the code makes another effect than the log holds (only a ``turn.patched`` branch keeps
the old path for such a run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from tether.engine._agents import build_spec
from tether.engine._context import EngineContext
from tether.engine._versions import AgentVersion
from tether.errors import ReplayDiverged
from tether.journal import NOT_MINTED, Journal, ReplayCheck, Versioning
from tether.store import SessionKey, SessionRow, require_capability

__all__ = ("UpgradeCheck", "Verdict", "check_upgrade")

Verdict = Literal["compatible", "diverged", "needs_patch"]

_PAGE = 100


@dataclass(frozen=True, slots=True)
class UpgradeCheck:
    """What the deploy gate found for one session, replayed against ``version`` (the newest
    version of its agent this runtime runs).

    ``recorded_version``: the version its latest execution ran (``None`` before versions, or
    for a log without executions). ``verdict``: ``compatible`` (the code makes every recorded
    effect), ``diverged`` (a model call's input differs: the code builds the prompt another
    way) or ``needs_patch`` (the code makes another effect than the log holds, or fails on
    it); ``seq`` and ``differs`` (``diff_pins`` words: ``system prompt``, ``tool set: +x``,
    ...) say where and what. ``pending``: a run would take the session up (it is parked on
    an approval, an input or children, cut by a crash, or has a submission not yet settled),
    so a divergence is one a deploy would meet. ``detail``: one line for a person.

    Example::

        for check in await runtime.check_upgrade(agent="support", since=yesterday):
            if check.verdict != "compatible" and check.pending:
                print(check.key, check.verdict, check.seq, ", ".join(check.differs))
    """

    conversation_id: str
    key: SessionKey
    version: str
    recorded_version: str | None
    verdict: Verdict
    seq: int | None
    differs: tuple[str, ...]
    pending: bool
    detail: str

    @property
    def blocks(self) -> bool:
        """Whether this session fails the gate: it diverged and a run would meet it."""
        return self.verdict != "compatible" and self.pending


async def check_upgrade(
    context: EngineContext,
    *,
    agent: str | None = None,
    version: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
) -> list[UpgradeCheck]:
    """Up to ``limit`` sessions (newest activity first; of ``agent``, of those whose latest
    execution recorded ``version``, of those active at or after ``since``), each checked
    against the newest version of its agent. Sessions of an agent this runtime does not run
    are passed over."""
    index = require_capability(context.capabilities.sessions, "sessions")
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    checks: list[UpgradeCheck] = []
    after: str | None = None
    while len(checks) < limit:
        rows = await index.list_sessions(agent=agent, limit=_PAGE, after=after)
        for row in rows:
            if since is not None and row.last_activity_at < since:
                return checks  # newest activity first: the rest are older still
            newest = context.versions.newest(row.key.agent)
            if newest is None:
                continue  # an agent this runtime does not run
            checked = await _check_session(context, row, newest, version)
            if checked is not None:
                checks.append(checked)
                if len(checks) >= limit:
                    break
        if len(rows) < _PAGE:
            break
        after = rows[-1].cursor
    return checks


async def _check_session(
    context: EngineContext, row: SessionRow, newest: AgentVersion, wanted: str | None
) -> UpgradeCheck | None:
    store = context.store
    # NOT_MINTED: a check supersedes no writer (a run may be working on this session).
    journal = await Journal.open(
        store, row.conversation_id, fence=NOT_MINTED, capabilities=context.capabilities
    )
    latest = (await journal.refresh()).latest
    recorded = None if latest is None else latest.version
    if wanted is not None and recorded != wanted:
        return None
    unsettled = await store.list_submissions(conversation_id=row.conversation_id, unsettled=True)

    def found(
        verdict: Verdict,
        detail: str,
        *,
        pending: bool,
        seq: int | None = None,
        differs: Sequence[str] = (),
    ) -> UpgradeCheck:
        return UpgradeCheck(
            conversation_id=row.conversation_id,
            key=row.key,
            version=newest.version,
            recorded_version=recorded,
            verdict=verdict,
            seq=seq,
            differs=tuple(differs),
            pending=pending or bool(unsettled),
            detail=" ".join(detail.split()),
        )

    try:
        spec = await build_spec(
            newest.definition, newest.agent, row.key.instance, context.config.env
        )
        versioning = Versioning(newest.version, context.versions.pins_for(spec), "strict")
        result: ReplayCheck = await journal.check(spec.harness, versioning=versioning)
    except Exception as exc:  # the new code fails on this log: it cannot take it up as it is
        return found("needs_patch", f"the check failed: {type(exc).__name__}: {exc}", pending=False)
    diverged = result.diverged
    if diverged is None:
        waits = "; the pending one up to where it waits" if result.pending else ""
        return found(
            "compatible",
            f"{result.executions} executions replay on {newest.version}{waits}",
            pending=result.pending,
        )
    said = str(diverged)
    prefix = f"execution {diverged.execution_id}: "
    return found(
        _verdict(diverged),
        said.removeprefix(prefix) if diverged.execution_id else said,
        pending=result.pending,
        seq=diverged.seq,
        differs=diverged.differs,
    )


def _verdict(diverged: ReplayDiverged) -> Verdict:
    """``diverged`` when the code asked the model where the log did, with another input;
    ``needs_patch`` for any other effect (or one too many, or one left unmade)."""
    expected, got = diverged.expected, diverged.got
    if (
        expected is not None
        and got is not None
        and expected.get("kind") == got.get("kind") == "model_called"
    ):
        return "diverged"
    return "needs_patch"
