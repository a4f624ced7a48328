"""What the benchmark scripts print: a plain-text table, and the goals table each ends with.

Every script that states a goal ends its output with ``print_goals``: a markdown table,

    ## Goals
    | goal | measured | met |
    |---|---|---|
    | engine admission → settled p50 ≤ 2 ms | 3.1 ms | no |

where met is ``yes``, ``no`` or ``n/a`` (the run's sizes are too small to judge it, or what it
is judged on was not run). ``python -m benchmarks`` reads it back with ``split_goals``, from
any script's output, into the one table of every goal its results file holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = (
    "Goal",
    "goals_table",
    "judged",
    "met_text",
    "parse_goals",
    "print_goals",
    "print_table",
    "split_goals",
)


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    print(f"\n{title}\n")
    print("  ".join(str(cell).ljust(width) for cell, width in zip(header, widths, strict=True)))
    print("  ".join("-" * width for width in widths))
    for row in rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    print()


class Goal(NamedTuple):
    goal: str
    measured: str
    met: bool | None
    """``None``: not judged in this run (too small a run, or what it needs did not run)."""


MET = {True: "yes", False: "no", None: "n/a"}


def met_text(met: bool | None) -> str:
    return MET[met]


def judged(ok: bool, judge: bool) -> bool | None:
    """``ok`` if the run is large enough to ``judge`` it, else ``None``."""
    return ok if judge else None


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def goals_table(goals: Iterable[Goal], *, source: Sequence[str] | None = None) -> str:
    """The goals as a markdown table (``source``: a last column saying where each is from)."""
    goals = list(goals)
    header = ["goal", "measured", "met"] + (["from"] if source is not None else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for n, goal in enumerate(goals):
        cells = [_cell(goal.goal), _cell(goal.measured), met_text(goal.met)]
        if source is not None:
            cells.append(_cell(source[n]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def print_goals(goals: Iterable[Goal]) -> None:
    """End a script's output with its goals, in the shape ``parse_goals`` reads."""
    print("\n## Goals\n" + goals_table(goals), flush=True)


def _split(line: str) -> list[str]:
    cells, cell, escaped = [], "", False
    for char in line.strip().removeprefix("|").removesuffix("|"):
        if escaped:
            cell += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            cells.append(cell.strip())
            cell = ""
        else:
            cell += char
    cells.append(cell.strip())
    return cells


def split_goals(output: str) -> tuple[str, list[Goal] | None]:
    """A script's ``output`` without the goals table it ends with, and that table's goals
    (``None`` if it printed none; the last table, if it printed more)."""
    lines = output.splitlines()
    starts = [n for n, line in enumerate(lines) if line.strip() == "## Goals"]
    if not starts:
        return output, None
    start = end = starts[-1] + 1
    goals: list[Goal] = []
    header = True
    for n in range(start, len(lines)):
        line = lines[n].strip()
        if not line:
            if goals or not header:
                break  # the blank line after the table
            continue  # a blank line between the heading and the table
        if not line.startswith("|"):
            break
        end = n + 1
        cells = _split(line)
        if header:
            header = False
            continue
        if set("".join(cells)) <= set("-: ") or len(cells) < 3:
            continue  # the separator
        met = {"yes": True, "no": False}.get(cells[2].lower())
        goals.append(Goal(cells[0], cells[1], met))
    rest = "\n".join(lines[: starts[-1]] + lines[end:])
    return rest.rstrip() + ("\n" if output.endswith("\n") else ""), goals


def parse_goals(output: str) -> list[Goal] | None:
    """The goals of the goals table a script's ``output`` ends with (the last one, if it
    printed more); ``None`` if it printed none."""
    return split_goals(output)[1]
