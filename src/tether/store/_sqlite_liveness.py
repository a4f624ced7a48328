"""Workers' liveness locks beside a SQLite file: one lock file per owner, held with ``flock``.

``<db>-owners/<owner>.lock`` exists from the moment a worker takes its lock until it shuts
down in order (or a peer, finding the lock free, forgets the owner after taking its claims
over). The kernel drops a ``flock`` when the last descriptor of its open file closes, which
a process's death does, whatever killed it; a paused (``SIGSTOP``ped) process keeps it.
A lock file with no lock held on it is the trace of an owner that died.

``flock`` locks belong to an open file description, so two opens in one process exclude
each other too: a probe never mistakes this process's own owners for dead ones.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from collections.abc import Callable, Collection
from pathlib import Path

from tether.errors import StoreUnavailable

__all__ = ("OwnerLocks",)

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


class OwnerLocks:
    """The lock files of the workers of one SQLite database."""

    def __init__(self, database: Path) -> None:
        self.directory = database.with_name(f"{database.name}-owners")
        self._held: dict[str, int] = {}  # owner id -> the descriptor holding its lock

    def path(self, owner_id: str) -> Path:
        if _PLAIN_NAME.fullmatch(owner_id):
            return self.directory / f"{owner_id}.lock"
        digest = hashlib.sha256(owner_id.encode()).hexdigest()[:32]
        return self.directory / f"sha256-{digest}.lock"

    def hold(self, owner_id: str) -> None:
        if owner_id in self._held:
            return
        try:
            self.directory.mkdir(exist_ok=True)
            descriptor = os.open(self.path(owner_id), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreUnavailable(f"cannot take the liveness lock of {owner_id!r}: {exc}") from exc
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise StoreUnavailable(
                f"owner id {owner_id!r} is in use by a live process on this store"
            ) from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, owner_id.encode())  # a hashed name still says whose it is
        self._held[owner_id] = descriptor

    def sweep(self, has_claims: Callable[[str], bool]) -> list[str]:
        """Forget the dead owners that hold no claim: workers that died while idle leave
        their lock file behind, and nobody else would ever look at it again. Returns the
        owners forgotten."""
        forgotten: list[str] = []
        if not self.directory.is_dir():
            return forgotten
        for path in self.directory.glob("*.lock"):
            with contextlib.suppress(OSError):
                owner_id = path.read_text()
                if owner_id and path == self.path(owner_id) and not has_claims(owner_id):
                    if self.forget(owner_id):
                        forgotten.append(owner_id)
        return forgotten

    def release(self, owner_id: str) -> bool:
        """Give ``owner_id``'s lock up; whether this process held it."""
        descriptor = self._held.pop(owner_id, None)
        if descriptor is None:
            return False
        # Unlinked while still locked: a probe that opened it meanwhile finds it free only
        # after this, when the owner has stopped claiming.
        with contextlib.suppress(FileNotFoundError):
            self.path(owner_id).unlink()
        os.close(descriptor)
        return True

    def release_all(self) -> list[str]:
        """Give every lock this process holds up; the owners released."""
        released = list(self._held)
        for owner_id in released:
            self.release(owner_id)
        return released

    def dead(self, owner_ids: Collection[str]) -> set[str]:
        return {owner for owner in owner_ids if self._probe(owner, forget=False)}

    def forget(self, owner_id: str) -> bool:
        """Forget ``owner_id`` if it took its lock here and no longer holds it; whether it
        did."""
        return self._probe(owner_id, forget=True)

    def _probe(self, owner_id: str, *, forget: bool) -> bool:
        """Whether ``owner_id`` took its lock here and no longer holds it (unlinking its lock
        file, if ``forget``)."""
        if owner_id in self._held:
            return False
        path = self.path(owner_id)
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return False  # never took one here, or forgotten already
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # held: the owner lives (or is paused)
            if forget:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            return True
        finally:
            os.close(descriptor)
