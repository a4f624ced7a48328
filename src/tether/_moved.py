"""Old import paths of names that moved to their one home, kept working with a warning.

A package whose public name moved keeps the old path for its users through a module
``__getattr__`` (so the name is in neither its namespace nor its ``__all__``)::

    _MOVED = {"ScriptedModel": "tether.models"}

    def __getattr__(name: str) -> Any:
        return moved(__name__, name, _MOVED)
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ("moved",)


def moved(module: str, name: str, homes: Mapping[str, str]) -> Any:
    """``name`` from its home ``homes[name]``, warning that ``module`` no longer has it;
    ``AttributeError`` for a name that never moved (what a module ``__getattr__`` owes)."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} has moved: import it from {home}",
        DeprecationWarning,
        stacklevel=3,  # the caller of the module's __getattr__: the import or attribute use
    )
    return getattr(importlib.import_module(home), name)
