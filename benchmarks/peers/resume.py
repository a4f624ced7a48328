"""Build a log, or resume one cold, in a process of its own:

    python -m benchmarks.peers.resume {tether,langgraph,dbos} {build,resume} DIR [SIZE]

``build`` takes the log size (Tether: records; LangGraph and DBOS: turns). ``resume`` times
the open and the first turn after it (one more turn of the fake model: a tool call, its
result, the final answer). Prints one JSON object: ``{"ms": ..., "count": ...}``
(``count``: records, messages or steps).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ("in_fresh_process",)


def in_fresh_process(system: str, action: str, directory: Path, size: int = 0) -> dict[str, float]:
    """Run ``action`` in a new interpreter; its imports are done before anything is timed."""
    root = Path(__file__).resolve().parent.parent.parent
    pythonpath = os.environ.get("PYTHONPATH", "")
    directory.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.peers.resume",
            system,
            action,
            str(directory),
            str(size),
        ],
        cwd=directory.parent,  # the caller's scratch directory, not the working one
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(root), pythonpath)))},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if system == "dbos" and action == "build":
        return {"ms": 0.0, "count": float(size)}  # the build ends its process mid-workflow
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{system} {action} failed:\n{done.stdout}\n{done.stderr}")
    result: dict[str, float] = json.loads(lines[-1])
    return result


def main(argv: list[str]) -> None:
    system, action, directory, size = argv[0], argv[1], Path(argv[2]), int(argv[3])
    if system == "tether":
        from benchmarks.peers import tether_side as side
    elif system == "langgraph":
        from benchmarks.peers import langgraph_side as side  # type: ignore[no-redef]
    else:
        from benchmarks.peers import dbos_side as side  # type: ignore[no-redef]
    if action == "build":
        print(json.dumps({"ms": 0.0, "count": side.build_log(directory, size)}))
    else:
        ms, count = side.resume(directory)
        print(json.dumps({"ms": ms, "count": count}))


if __name__ == "__main__":
    main(sys.argv[1:])
