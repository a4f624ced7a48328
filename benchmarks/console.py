"""How fast the web console opens a long session (issue 23, item 7: a 10,000-record session
in under 1 s), measured in Debian's Chromium driven by Playwright.

    python benchmarks/console.py [--records 10000] [--rounds 5]

A SQLite store is filled through the runtime with demo turns (messages, and one research
tool call in five) until the session holds ``--records`` records; ``tether serve --demo``
serves it from a child process; a fresh tab then, each round:

- opens the session's chat (``/ui?...&panel=chat``): the time from navigation start until
  the last answer is on screen (the page reads the session's head, then streams its last
  400 records' events; the rest is one click away);
- switches to it from another session (a click in the sessions panel);
- opens its inspector: the newest page of records, the spans of the last 2,000 records,
  usage and the subagent tree.

Times are the page's own (``performance.now()``), so the browser's start is not counted.
Without Chromium (``apt-get install chromium``) or Playwright it says so and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import httpx

from benchmarks._measure import scratch
from benchmarks._table import Goal, judged, print_goals, print_table

CHROMIUM = os.environ.get("TETHER_TEST_CHROMIUM", "/usr/bin/chromium")
AGENT, INSTANCE, SESSION = "assistant", "bench", "long"
GOAL_MS = 1000.0
GOAL_RECORDS = 10_000


async def _fill(path: Path, records: int) -> tuple[int, str]:
    """Turns until the session holds ``records`` records; its head and last answer."""
    os.environ["TETHER_DEMO_RESEARCH_SECONDS"] = "0"
    from tether.demo import demo_agents, demo_subagents
    from tether.engine import Runtime

    async with Runtime(demo_agents(), f"sqlite:///{path}", subagents=demo_subagents()) as runtime:
        head, turn, last = 0, 0, ""
        while head < records:
            body = f"research topic {turn}" if turn % 5 == 4 else f"hello number {turn}"
            receipt = await runtime.dispatch(AGENT, INSTANCE, body, session=SESSION)
            last = str((await runtime.wait(receipt.submission_id))["result"])
            head = await runtime.wait_for_append(receipt.conversation_id, after=0)
            turn += 1
        # Another session to switch from.
        receipt = await runtime.dispatch(AGENT, INSTANCE, "hi", session="other")
        await runtime.wait(receipt.submission_id)
    return head, last


def _serve(path: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-c",
        "from tether.cli import main; main()",
        "serve",
        "--demo",
        "--store",
        f"sqlite:///{path}",
        "--port",
        str(port),
    ]
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=out)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"the server did not start:\n{log.read_text()}")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LAST_ANSWER = """([text]) => {
  const answers = document.querySelectorAll('#transcript .msg.agent:not(.streaming)');
  return answers.length > 0 && answers[answers.length - 1].textContent === text;
}"""
INSPECTED = """() => document.querySelectorAll('#records-body > tr').length === 100
  && document.querySelector('#spans .timeline') !== null
  && document.querySelector('#usage table') !== null
  && document.querySelector('#tree').childElementCount > 0"""


def _measure(url: str, rounds: int, last: str) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    chat = f"{url}/ui?agent={AGENT}&instance={INSTANCE}&session={SESSION}&panel=chat"
    other = f"{url}/ui?agent={AGENT}&instance={INSTANCE}&session=other&panel=chat"
    inspector = chat.replace("panel=chat", "panel=inspector")
    times: dict[str, list[float]] = {"chat": [], "switch": [], "inspector": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        for _ in range(rounds):
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            page = context.new_page()
            page.goto(chat, wait_until="commit")
            page.wait_for_function(LAST_ANSWER, arg=[last], timeout=60_000)
            times["chat"].append(page.evaluate("performance.now()"))

            page.goto(other)
            page.wait_for_selector("body[data-ready]", state="attached")
            link = page.locator("#session-list a", has_text=f"{INSTANCE} / {SESSION}")
            link.wait_for()
            started = page.evaluate("performance.now()")
            link.click()
            page.wait_for_function(LAST_ANSWER, arg=[last], timeout=60_000)
            times["switch"].append(page.evaluate("performance.now()") - started)

            page.goto(inspector, wait_until="commit")
            page.wait_for_function(INSPECTED, timeout=60_000)
            times["inspector"].append(page.evaluate("performance.now()"))
            context.close()
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=GOAL_RECORDS)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        print("needs Playwright: pip install -e '.[dev]'", file=sys.stderr)
        raise SystemExit(2) from None
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        print(f"needs Chromium at {CHROMIUM}: apt-get install -y chromium", file=sys.stderr)
        raise SystemExit(2)

    with scratch("tether-console-") as tmp:
        began = time.monotonic()
        head, last = asyncio.run(_fill(tmp / "data", args.records))
        print(f"filled a session of {head} records in {time.monotonic() - began:.1f} s")
        port = _free_port()
        server = _serve(tmp / "data", port, tmp / "serve.log")
        try:
            times = _measure(f"http://127.0.0.1:{port}", args.rounds, last)
        finally:
            server.terminate()
            server.wait(30)

    rows = [
        [what, str(head), f"{statistics.median(ms):.0f}", f"{max(ms):.0f}"]
        for what, ms in (
            ("open the chat (last answer shown)", times["chat"]),
            ("switch to it from another session", times["switch"]),
            ("open the inspector", times["inspector"]),
        )
    ]
    print_table(
        f"the console on a long session ({args.rounds} rounds, fresh tab each, Chromium)",
        ["what", "records", "median ms", "max ms"],
        rows,
    )
    worst = max(statistics.median(ms) for ms in times.values())
    print_goals(
        [
            Goal(
                f"a {GOAL_RECORDS:,}-record session opens in the console < 1 s",
                f"{worst:.0f} ms (median, slowest of the three)",
                judged(worst < GOAL_MS, head >= GOAL_RECORDS),
            )
        ]
    )


if __name__ == "__main__":
    main()
