"""The TypeScript client's own tests (``clients/typescript``, Node's test runner), run from here.

They start real ``tether serve --demo`` processes from this virtualenv, SIGKILL one
mid-subscription, and check the generated types against the checked-in OpenAPI document;
running them under pytest puts them in the README's test command. Installing the client's
devDependencies needs the npm registry, which no test may reach: ``.ci/run`` runs ``npm ci``
first. Without Node or without that install these tests are skipped, with the reason (under
``CI``, they fail).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def _missing() -> str | None:
    if shutil.which("npm") is None:
        return "no npm: install Node.js 20 or newer"
    if not (CLIENT / "node_modules").is_dir():
        return f"the client's devDependencies are not installed: cd {CLIENT} && npm ci"
    return None


@pytest.mark.timeout(300)  # 32 tests that start servers one after another: 20 s idle
def test_the_typescript_client_passes_its_tests(tmp_path: Path) -> None:
    missing = _missing()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    tether = Path(sys.executable).with_name("tether")
    env = {**os.environ, "TETHER_BIN": str(tether), "TMPDIR": str(tmp_path)}
    env.pop("TETHER_URL", None)  # the tests start their own servers, one of which they kill
    done = subprocess.run(
        ["npm", "test"], cwd=CLIENT, env=env, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
