"""A pids cgroup per sandboxed command, for a worker that runs as root.

The kernel does not apply ``RLIMIT_NPROC`` to a process whose real user is root, in a user
namespace or not (``copy_process`` exempts ``INIT_USER``), so ``prlimit --nproc`` bounds no
fork bomb there. A cgroup's ``pids.max`` does, whoever the user: each command gets a child
cgroup of the worker's own pids cgroup, with ``pids.max`` set, entered before ``bwrap``
starts (so everything the sandbox forks is counted), and removed once the sandbox is gone.

Where: cgroup v1's ``pids`` hierarchy, or cgroup v2 where the worker's cgroup already hands
the ``pids`` controller to its children (its ``cgroup.subtree_control`` lists it: in practice
the root cgroup of a VM). Tether changes no ``subtree_control``: on a v2 host whose service
cgroup holds processes, the kernel would refuse it anyway (no internal processes).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import time

__all__ = ("PidsCgroup", "pids_parent")

_names = itertools.count()
_NAME = re.compile(r"tether-bash-(\d+)-\d+")


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """``(root, mount point, fs type, super options)`` of each mount (``/proc/self/mountinfo``)."""
    mounts = []
    with open("/proc/self/mountinfo") as lines:
        for line in lines:
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) >= 5 and len(tail) >= 3:
                mounts.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return mounts


def _under(mount_root: str, mount_point: str, path: str) -> str | None:
    """Where the cgroup ``path`` lies in a hierarchy mounted from ``mount_root``."""
    if path != mount_root and not path.startswith(mount_root.rstrip("/") + "/"):
        return None
    return os.path.join(mount_point, path[len(mount_root) :].lstrip("/"))


def _delegates_pids(cgroup: str) -> bool:
    """Whether a v2 cgroup gives its children the pids controller."""
    try:
        with open(os.path.join(cgroup, "cgroup.subtree_control")) as f:
            return "pids" in f.read().split()
    except OSError:
        return False


def _candidates() -> list[str]:
    """The worker's own pids cgroups: v1's, then v2's if it delegates the controller."""
    try:
        with open("/proc/self/cgroup") as lines:
            memberships = [line.rstrip("\n").split(":", 2) for line in lines]
        mounts = _mounts()
    except OSError:
        return []
    v1, v2 = [], []
    for hierarchy, controllers, path in (m for m in memberships if len(m) == 3):
        for mount_root, point, kind, options in mounts:
            where = _under(mount_root, point, path)
            if where is None:
                continue
            if kind == "cgroup" and "pids" in options and "pids" in controllers.split(","):
                v1.append(where)
            elif kind == "cgroup2" and hierarchy == "0" and _delegates_pids(where):
                v2.append(where)
    return v1 + v2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(parent: str) -> None:
    """Remove the empty cgroups a worker that is gone left behind (killed before it could)."""
    for name in os.listdir(parent):
        maker = _NAME.fullmatch(name)
        if maker is not None and not _alive(int(maker.group(1))):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(parent, name))


@functools.cache
def pids_parent() -> str | None:
    """The pids cgroup directory this process may make children in (``None``: none), found
    and tried once per process; what dead workers left in it is removed."""
    for parent in _candidates():
        try:
            PidsCgroup(parent, 1).remove()
        except OSError:
            continue
        _sweep(parent)
        return parent
    return None


class PidsCgroup:
    """A child of ``parent`` whose ``pids.max`` is ``limit``."""

    def __init__(self, parent: str, limit: int) -> None:
        self.path = os.path.join(parent, f"tether-bash-{os.getpid()}-{next(_names)}")
        os.mkdir(self.path)
        try:
            with open(os.path.join(self.path, "pids.max"), "w") as f:
                f.write(str(limit))
        except OSError:
            self.remove()
            raise
        self.procs = os.path.join(self.path, "cgroup.procs")

    def remove(self, seconds: float = 10.0) -> bool:
        """Remove the cgroup once the last of its processes is gone (the kernel refuses while
        one is exiting); whether it was, within ``seconds``. Blocks: call it off the loop."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)
