"""``examples.multitenant``'s runbook against its keyless model: the instance picks the tenant's
prompt, an unknown tenant is refused with a clear error, and ``load.py`` shows head-of-line
order inside each session while sessions and tenants run at once (order, never wall time)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from .runbook import ROOT, WAIT, start_example

pytestmark = pytest.mark.process

TENANTS = ("acme", "globex", "initech")
VOICES = {
    "acme": "Acme Anvils support, cheerfully",
    "globex": "Globex Corporation support, formally",
    "initech": "Initech support, tersely",
}


def _load(url: str, *args: str) -> str:
    """``python -m examples.multitenant.load --url ...``, as the runbook runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "examples.multitenant.load", "--url", url, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a["started"] < b["settled"] and b["started"] < a["settled"])


def test_the_multitenant_runbook(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'data'}"
    server = start_example("multitenant", store, tmp_path / "multitenant.log")
    with httpx.Client(base_url=server.url, timeout=WAIT) as client:
        for tenant in TENANTS:  # one definition; each tenant's answer in its own voice
            answered = client.post(
                f"/agents/support/{tenant}?wait=true", json={"body": "hello", "session": "ann"}
            ).json()
            assert answered["status"] == "succeeded"
            assert answered["result"] == f"{VOICES[tenant]}: answer 1 to 'hello'"
        refused = client.post("/agents/support/hooli?wait=true", json={"body": "hello"}).json()
        assert refused["status"] == "failed" and refused["errorCode"] == "run_failed"
        assert refused["error"] == (
            "UnknownTenant: no tenant 'hooli' (the tenants are acme, globex, initech)"
        )

    # The stopwatch, as a program reads it (on fresh sessions: their answers count from 1).
    runs = json.loads(_load(server.url, "--sessions", "2", "--messages", "4", "--json"))
    # And as a person reads it.
    printed = _load(server.url).splitlines()
    server.stop()
    assert [row.split()[0] for row in printed[:9]] == [
        f"{tenant}/user-{n}" for tenant in TENANTS for n in (1, 2, 3)
    ]
    assert printed[-1].startswith("head-of-line order in every session: yes; ")

    sessions: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        sessions.setdefault((run["tenant"], run["session"]), []).append(run)
    assert len(sessions) == 6 and all(len(rows) == 4 for rows in sessions.values())

    # Head-of-line inside a session: answered in submission order, one after the other,
    # each seeing the answers before it (so answer n is to message n).
    for (tenant, _), rows in sessions.items():
        assert [row["index"] for row in rows] == [1, 2, 3, 4]
        for row in rows:
            assert (
                row["result"]
                == f"{VOICES[tenant]}: answer {row['index']} to 'message {row['index']}'"
            )
        for earlier, later in itertools.pairwise(rows):
            assert later["started"] >= earlier["settled"]
            assert not _overlap(earlier, later)

    # Sessions and tenants in parallel: runs of two sessions of a tenant overlap, and of two
    # tenants; another session's first answer came before some session's last one.
    keys = list(sessions)
    overlapping = [
        (a, b)
        for a, b in itertools.combinations(keys, 2)
        if any(_overlap(x, y) for x in sessions[a] for y in sessions[b])
    ]
    assert any(a[0] == b[0] for a, b in overlapping), "no two sessions of a tenant overlapped"
    assert any(a[0] != b[0] for a, b in overlapping), "no two tenants overlapped"
    assert any(
        sessions[other][0]["settled"] < sessions[key][-1]["settled"]
        for key in keys
        for other in keys
        if other != key
    )
