"""``tether config``: the settings ``tether serve`` (or ``tether worker``) would run with in
this directory and environment, and where each came from, secrets masked."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ("show",)


def show(*, worker: bool, config: Path | None, console: Console) -> None:
    """Print the effective settings as a table: key, value, source."""
    from tether.cli._settings import ServeSettings, WorkerSettings, resolve

    model = WorkerSettings if worker else ServeSettings
    resolved = resolve(model, config=config)
    read = "no file" if resolved.file is None else f"file {resolved.file}"
    console.print(
        f"tether {model.command}: flag > environment > file > default ({escape(read)}); "
        "an App's own settings apply where this shows default"
    )
    table = Table(box=None, pad_edge=False)
    for column in ("setting", "value", "from"):
        table.add_column(column)
    for key, value, source in resolved.rows():
        table.add_row(key, escape(value), escape(source))
    console.print(table)
