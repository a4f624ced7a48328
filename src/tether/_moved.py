"""Old import paths of names that moved to their one home, kept working with a warning.

A package whose public name moved keeps the old path for its users through a module
``__getattr__`` (so the name is in neither its namespace nor its ``__all__``)::

    _MOVED = {"ScriptedModel": "tether.models", "Old": "tether.engine:NewName"}

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
    """``name`` from its home ``homes[name]`` (a module, or ``module:new_name`` for a name
    that was renamed too), warning that ``module`` no longer has it; ``AttributeError`` for a
    name that never moved (what a module ``__getattr__`` owes)."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    home, _, new_name = home.partition(":")
    where = f"{home} as {new_name}" if new_name else home
    warnings.warn(
        f"{module}.{name} has moved: import it from {where}",
        DeprecationWarning,
        stacklevel=3,  # the caller of the module's __getattr__: the import or attribute use
    )
    return getattr(importlib.import_module(home), new_name or name)
