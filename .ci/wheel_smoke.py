"""The checks of .ci/wheel-smoke, run by the fresh virtualenv's Python with the wheel
installed: only the standard library and the installed package.

The wheel holds every file of the web console and the sdist what a build needs; the installed
``tether`` is the virtualenv's (not the checkout's), says the version pyproject.toml declares,
and ``tether serve --demo`` from it answers ``/healthz``, serves the console's page and a
script of it, the API docs page and an asset of it, and runs one message to its answer.
Usage: ``python wheel_smoke.py CHECKOUT DIST``.
"""

from __future__ import annotations

import json
import re
import selectors
import signal
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.request
import zipfile
from importlib.metadata import version
from pathlib import Path

READY_SECONDS = 90.0
"""How long the server may take to start (a loaded two-core machine imports slowly)."""


def check(condition: object, what: str) -> None:
    if not condition:
        raise SystemExit(f"wheel smoke: {what}")


def get(url: str, **headers: str) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.status, answer.headers.get("content-type", ""), answer.read()


def check_archives(root: Path, dist: Path) -> None:
    [wheel] = dist.glob("tether-*.whl")
    [sdist] = dist.glob("tether-*.tar.gz")
    packed = set(zipfile.ZipFile(wheel).namelist())
    console = root / "src" / "tether" / "http" / "console"
    missing = sorted(
        name
        for name in (f"tether/http/console/{path.name}" for path in console.iterdir())
        if name not in packed
    )
    check(not missing, f"the wheel lacks the console's {missing}")
    check("tether/py.typed" in packed, "the wheel lacks py.typed")
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
    for needed in ("pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE"):
        check(f"{top}/{needed}" in names, f"the sdist lacks {needed}")


def start_server(data: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``tether serve --demo`` on any free port (``--port 0``), read from its banner."""
    tether = Path(sys.executable).with_name("tether")
    command = [str(tether), "serve", "--demo", "--port", "0", "--store", f"sqlite:///{data}"]
    with log.open("wb") as errors:
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors)
    assert server.stdout is not None
    watch = selectors.DefaultSelector()
    watch.register(server.stdout, selectors.EVENT_READ)
    shown, deadline = b"", time.monotonic() + READY_SECONDS
    while (found := re.search(rb"on (http://127\.0\.0\.1:\d+) ", shown)) is None:
        left = deadline - time.monotonic()
        if left <= 0 or server.poll() is not None or not watch.select(left):
            server.kill()
            raise SystemExit(f"wheel smoke: the server did not start:\n{log.read_text()}")
        chunk = server.stdout.read1(4096)  # type: ignore[attr-defined]
        shown += chunk or b""
    return server, found.group(1).decode()


def check_server(url: str) -> None:
    status, _, body = get(f"{url}/healthz")
    check(status == 200 and json.loads(body) == {"ok": True}, f"/healthz answered {body!r}")
    status, kind, page = get(f"{url}/ui")
    check(status == 200 and kind.startswith("text/html"), f"/ui answered {status} {kind}")
    scripts = re.findall(rb'src="(?:/ui/|\./)?([\w.-]+\.js)"', page)
    check(scripts, "the console's page names no script")
    status, kind, _ = get(f"{url}/ui/{scripts[0].decode()}")
    check(status == 200 and "javascript" in kind, f"/ui/{scripts[0]!r} answered {status} {kind}")
    status, _, docs = get(f"{url}/docs")
    assets = re.findall(rb'(?:src|href)="(/static-offline-docs/[^"]+)"', docs)
    check(status == 200 and assets, "/docs names no asset of its own")
    for asset in assets:
        status, _, body = get(f"{url}{asset.decode()}")
        check(status == 200 and body, f"{asset!r} answered {status}")
    request = urllib.request.Request(
        f"{url}/agents/assistant/wheel-smoke?wait=true",
        data=json.dumps({"body": "hello from the wheel"}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        settled = json.loads(answer.read())
    check(
        settled.get("status") == "succeeded" and "hello from the wheel" in json.dumps(settled),
        f"a message to the demo settled {settled}",
    )


def main(root: Path, dist: Path) -> None:
    import tether

    installed = Path(tether.__file__).resolve()
    check(Path(sys.prefix).resolve() in installed.parents, f"tether imported from {installed}")
    declared = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    check(version("tether") == declared == tether.__version__, "the versions disagree")
    shown = subprocess.run(
        [str(Path(sys.executable).with_name("tether")), "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    check(shown == f"tether {declared}\n", f"tether --version printed {shown!r}")
    check_archives(root, dist)
    log = dist.parent / "serve.log"
    server, url = start_server(dist.parent / "data", log)
    try:
        check_server(url)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        finally:
            server.kill()
            assert server.stdout is not None
            server.stdout.close()
    check(server.returncode == 0, f"the server exited {server.returncode}:\n{log.read_text()}")
    print(f"wheel smoke: tether {declared} from the wheel served the demo, console and docs")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
