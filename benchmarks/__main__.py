"""Run every benchmark, Tether beside LangGraph and DBOS, and write the results.

    python -m benchmarks            # the full suite (about 10 minutes)
    python -m benchmarks --quick    # a tiny smoke run (sizes too small to judge)

Writes ``benchmarks/results/<date>.md`` (tables, one table of every goal, the suite's and each
script's, met or not, and the scripts' tables) and PNG plots beside it, and prints a summary
that lists every goal, the missed ones marked MISSED. Stores and scratch files go to a
temporary directory of its own (``TMPDIR`` chooses where), removed at the end; nothing is
written to the working directory. PostgreSQL: the database ``TETHER_BENCH_POSTGRES_URL`` (or
``TETHER_TEST_POSTGRES_URL``) names, else one the suite creates on the local server and drops.
The peers need ``pip install tether[bench]``; without it their columns say "skipped: install
tether[bench]".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

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
        help="skip the benchmark scripts (store_append, replay, engine, sse, postgres, http, "
        "scale)",
    )
    args = parser.parse_args(argv)
    return run(args.quick, args.out, scripts=not args.no_scripts)


if __name__ == "__main__":
    main()
