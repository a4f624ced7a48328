"""Reading an export-signing key named on the command line (``tether serve
--export-key-file``, ``tether export --key-file``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from tether.store import ExportKey

__all__ = ("load_export_key",)


def load_export_key(path: Path | None, option: str) -> ExportKey | None:
    """The signing key in ``path`` (``None`` without one); a bad file is a usage error
    naming ``option``."""
    if path is None:
        return None
    from tether.store import ExportKey

    try:
        return ExportKey.load(path)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None
