"""Help that wraps to the terminal and cuts nothing short."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from typer.core import TyperGroup

if TYPE_CHECKING:  # typer's own click (vendored since 0.2x); only the names it types with
    from typer._click import Context, HelpFormatter

__all__ = ("HELP_SETTINGS", "WholeSummaries")

HELP_SETTINGS = {"max_content_width": 120}
"""A wide terminal gets up to 120 columns of help (click's default stops at 80); a narrow one,
or none (a pipe, COLUMNS unset), gets its own width or 80, wrapped."""


class WholeSummaries(TyperGroup):
    """Lists each command with the whole first sentence of its help, wrapped: click cuts it to
    what fits beside the name on one line and ends it with ``...``, which at 80 columns left
    half the commands saying half of what they do."""

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=sys.maxsize)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
