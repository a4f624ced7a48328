"""Run every benchmark, Tether beside LangGraph and DBOS, and write the results.

    python -m benchmarks            # the full suite (about 10 minutes)
    python -m benchmarks --quick    # a tiny smoke run (sizes too small to judge)

Writes ``benchmarks/results/<date>.md`` (tables, goals, the existing scripts' tables) and PNG
plots beside it, and prints a summary. The peers need ``pip install tether[bench]``; without it
their columns say "skipped: install tether[bench]".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._compare import run


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="a tiny smoke run")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results",
        help="where to write the results file and plots",
    )
    parser.add_argument(
        "--no-scripts",
        action="store_true",
        help="skip the existing benchmark scripts (store_append, replay, engine, sse, postgres)",
    )
    args = parser.parse_args(argv)
    return run(args.quick, args.out, scripts=not args.no_scripts)


if __name__ == "__main__":
    main()
