"""The instructions a tenant's usage aggregate costs a model call (issue 41, item 1), counted
with valgrind's callgrind as ``benchmarks/instructions.py`` counts a turn.

    python benchmarks/usage.py [--calls 400] [--turn]

The workload is the append of one model call's records (``model_called`` and its
``assistant_message_completed``, with usage and cost: what the journal commits for a call)
to a conversation on a ``SqliteStore`` at ``synchronous=OFF``, once in a conversation of no
tenant (nothing to add up) and once in a tenant's (the completion's tokens and cost added to
the tenant's row for its day, and a reservation of the conversation given back, in the
append's commit). Each figure is the difference between runs of ``--calls`` and
``2 * --calls`` appends, divided by ``--calls``, so start-up cancels out. ``--turn`` also
counts a turn of the built-in agent (``benchmarks/instructions.py``'s figure), to say what
share of a turn the aggregate is.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from benchmarks._table import print_table
from benchmarks.instructions import ROOT, count_child, per_turn


async def _appends(directory: Path, tenant: str, count: int) -> None:
    """What the counted child runs: 50 appends to warm up, then ``count``."""
    from tether.messages import Message, Usage
    from tether.records import AssistantMessageCompleted, ModelCalled, RecordDraft
    from tether.store import NewSubmission, SessionKey, SqliteStore

    async with await SqliteStore.open(directory, synchronous="OFF") as store:
        new = NewSubmission(
            id="sub-1",
            key=SessionKey("a", "i", "default"),
            conversation_id="conv-1",
            input={"kind": "user", "body": "hi"},
            created_at=datetime.now(UTC),
            tenant=tenant or None,
        )
        await store.admit(new)
        head = await store.head("conv-1")
        for n in range(50 + count):
            drafts = [
                RecordDraft(ModelCalled(call_id=f"m{n}", model="openai:gpt-4.1", input_hash="h")),
                RecordDraft(
                    AssistantMessageCompleted(
                        call_id=f"m{n}",
                        message=Message.assistant("ok"),
                        usage=Usage(input_tokens=1200, output_tokens=80),
                        cost=0.00304,
                    )
                ),
            ]
            head = (await store.append("conv-1", drafts, expected_seq=head, fence=0))[-1].seq


def _counted(tenant: str, count: int) -> int:
    return count_child(Path(__file__), ROOT, tenant or "-", str(count))


def per_call(tenant: str, calls: int) -> float:
    return (_counted(tenant, 2 * calls) - _counted(tenant, calls)) / calls


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--turn", action="store_true", help="also count a turn, for scale")
    parser.add_argument("--child", nargs=3, metavar=("DIR", "TENANT", "COUNT"), help="internal")
    args = parser.parse_args()
    if args.child:
        directory, tenant, count = args.child
        asyncio.run(_appends(Path(directory), "" if tenant == "-" else tenant, int(count)))
        return
    if shutil.which("valgrind") is None:
        print("usage.py: valgrind is not installed (apt-get install valgrind)")
        return
    untenanted = per_call("", args.calls)
    tenanted = per_call("acme", args.calls)
    rows = [
        ["a conversation of no tenant", f"{untenanted:,.0f}", ""],
        ["a tenant's conversation", f"{tenanted:,.0f}", f"{tenanted - untenanted:+,.0f}"],
    ]
    if args.turn:
        turn = per_turn(ROOT, 20, 1)
        rows.append(["(a turn of the built-in agent)", f"{turn:,.0f}", ""])
        rows.append(["the aggregate, of a turn", f"{(tenanted - untenanted) / turn:.2%}", ""])
    print_table(
        f"Instructions an append of one model call's records ({args.calls} counted, "
        "SqliteStore at synchronous=OFF)",
        ["conversation", "instructions a call", "the aggregate"],
        rows,
    )


if __name__ == "__main__":
    main()
