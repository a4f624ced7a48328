"""What Tether writes by hand on its hot paths, beside the maintained library for the same job.

    python benchmarks/handwritten.py [--calls 20000] [--repeats 5] [--instructions]

One table, every row measured in the same run: the microseconds a call (the fastest of
``--repeats`` runs of ``--calls`` calls) and, with ``--instructions``, the instructions a call
as valgrind's callgrind counts them (a child process runs ``--calls`` and ``2 x --calls``
calls; the difference is divided by ``--calls``, so start-up and imports cancel out). On a
shared machine a timing varies by ±30% from one run to the next, an instruction count by
±0.2%: judge by the count. Each row also says whether both sides gave the same bytes.

- a ULID (``tether._ids.new_ulid``, on every record a writer drafts) against python-ulid's
  ``str(ULID())``;
- RFC 8785 canonical JSON (``tether._canonical.canonical_json``, on every record's payload
  a writer drafts: the bytes the hash chain is computed over) against the ``rfc8785``
  package's ``dumps``, for three payloads as records carry them: a user message, a tool call
  whose arguments hold floats (ours leaves orjson for its exact encoder), a message whose
  object keys are not ASCII (sorted by UTF-16 code units);
- SSE framing of one page of 500 stored records (``tether.http._sse``, the catch-up of every
  stream) against sse-starlette's ``ServerSentEvent(...).encode()`` with the same fields and
  ``\\n`` line ends.

Needs the ``dev`` extra (python-ulid, rfc8785, sse-starlette); ``--instructions`` needs
valgrind (``apt-get install valgrind``) and prints why it cannot count otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import rfc8785
from sse_starlette import ServerSentEvent
from ulid import ULID

from benchmarks._table import print_table
from tether._canonical import canonical_json
from tether._ids import new_ulid
from tether.http._sse import frame
from tether.messages import Message, TextPart, Usage
from tether.records import (
    AssistantMessageCompleted,
    Record,
    RecordDraft,
    ToolCalled,
    UserMessage,
    seal,
)

Call = Callable[[], object]

USER_MESSAGE = UserMessage(body="x" * 300).to_json_object()
TOOL_CALL = ToolCalled(
    call_id="call-1",
    tool="quote",
    args={"symbol": "ACME", "price": 101.25, "limit": 0.5, "shares": 40, "note": "buy"},
    idempotency_key="k-1",
    mediation="host",
).to_json_object()
NON_ASCII_KEYS = AssistantMessageCompleted(
    call_id="call-2",
    message=Message(role="assistant", parts=(TextPart(text="Grüße"),)),
    usage=Usage(input_tokens=1200, output_tokens=80),
).to_json_object() | {"métadonnées": {"clé": "valeur", "ключ": 1, "\U0001d11e": 2}}


def _page(count: int = 500) -> list[Record]:
    """A page of stored records as a stream's catch-up sends them."""
    records: list[Record] = []
    prev = ""
    for seq in range(1, count + 1):
        draft = RecordDraft(UserMessage(body="x" * 300), submission_id="s-1")
        record = seal(draft, conversation_id="c-1", session="default", seq=seq, prev_hash=prev)
        records.append(record)
        prev = record.hash
    return records


PAGE = _page()


def _ours_frames() -> bytes:
    return b"".join(frame(record) for record in PAGE)


def _starlette_frames() -> bytes:
    return b"".join(
        ServerSentEvent(
            record.to_json().decode(), id=str(record.seq), event=record.kind, sep="\n"
        ).encode()
        for record in PAGE
    )


def _python_ulid() -> str:
    return str(ULID())


# name: (what, ours, theirs, whether their output must equal ours byte for byte)
CASES: dict[str, tuple[str, Call, Call, bool]] = {
    "ulid": ("a ULID", new_ulid, _python_ulid, False),
    "canonical-user": (
        "canonical JSON: a user message",
        lambda: canonical_json(USER_MESSAGE),
        lambda: rfc8785.dumps(USER_MESSAGE),
        True,
    ),
    "canonical-floats": (
        "canonical JSON: a tool call with floats",
        lambda: canonical_json(TOOL_CALL),
        lambda: rfc8785.dumps(TOOL_CALL),
        True,
    ),
    "canonical-keys": (
        "canonical JSON: non-ASCII keys",
        lambda: canonical_json(NON_ASCII_KEYS),
        lambda: rfc8785.dumps(NON_ASCII_KEYS),
        True,
    ),
    "sse-page": ("SSE: a page of 500 records", _ours_frames, _starlette_frames, True),
}
SIDES = ("ours", "library")


def _call(case: str, side: str) -> Call:
    _, ours, theirs, _ = CASES[case]
    return ours if side == "ours" else theirs


def _same(case: str) -> str:
    _, ours, theirs, exact = CASES[case]
    if not exact:  # a ULID is random: the same format, read back to the same time
        made = ours()
        assert isinstance(made, str)
        return "same format" if str(ULID.from_str(made)) == made else "DIFFERENT"
    return "same bytes" if ours() == theirs() else "DIFFERENT"


def _seconds_a_call(call: Call, calls: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, time.perf_counter() - start)
    return best / calls


def _run(case: str, side: str, calls: int) -> None:
    call = _call(case, side)
    for _ in range(calls):
        call()


def _counted(case: str, side: str, calls: int) -> int:
    """Instructions a child process executes making ``calls`` calls of one side of a case."""
    with tempfile.TemporaryDirectory(prefix="tether-handwritten-") as tmp:
        report = Path(tmp) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={report}",
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                case,
                side,
                str(calls),
            ],
            env=dict(os.environ, PYTHONMALLOC="malloc", PYTHONHASHSEED="0"),
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"the counted run failed:\n{done.stdout}\n{done.stderr[-2000:]}")
        return int(found.group(1))


def _instructions_a_call(case: str, side: str, calls: int) -> float:
    return (_counted(case, side, 2 * calls) - _counted(case, side, calls)) / calls


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="also count instructions")
    parser.add_argument("--child", nargs=3, metavar=("CASE", "SIDE", "CALLS"), help="internal")
    args = parser.parse_args()
    if args.child:
        case, side, calls = args.child
        _run(case, side, int(calls))
        return
    count = args.instructions and shutil.which("valgrind") is not None
    if args.instructions and not count:
        print("handwritten.py: valgrind is not installed (apt-get install valgrind)")
    rows: list[list[str]] = []
    for case, (what, *_) in CASES.items():
        calls = max(1, args.calls // 500) if case == "sse-page" else args.calls
        seconds = {side: _seconds_a_call(_call(case, side), calls, args.repeats) for side in SIDES}
        row = [what, _same(case), *(f"{seconds[side] * 1e6:,.2f}" for side in SIDES)]
        row.append(f"{seconds['library'] / seconds['ours']:.1f}x")
        if count:
            counted = {side: _instructions_a_call(case, side, calls) for side in SIDES}
            row += [f"{counted[side]:,.0f}" for side in SIDES]
            row.append(f"{counted['library'] / counted['ours']:.1f}x")
        rows.append(row)
    header: list[str] = ["what", "output", "ours µs", "library µs", "library/ours"]
    if count:
        header += ["ours instr.", "library instr.", "library/ours"]
    print_table(
        f"Hand-written against the library, a call each (fastest of {args.repeats} runs; "
        "libraries: python-ulid, rfc8785, sse-starlette)",
        header,
        rows,
    )


if __name__ == "__main__":
    main()
