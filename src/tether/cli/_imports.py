"""Importing what an application names as ``module:attribute`` (``--app``, ``--auth``)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from tether.cli._exit import ExitCode, describe, fail

__all__ = ("import_attribute",)


def import_attribute(spec: str, option: str, example: str) -> Any:
    """The object ``module:attribute`` names (importing the module from the working
    directory too, as ``python -m`` would); exits with :attr:`ExitCode.BAD_APP` and one
    line saying why if it cannot."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        fail(f"{option} {spec}: use module:attribute (e.g. {example})", ExitCode.BAD_APP)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # the console script's path lacks it, unlike python -m
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and f"{module_name}.".startswith(f"{exc.name}."):
            fail(f"{option} {spec}: no module named {exc.name!r}", ExitCode.BAD_APP)
        fail(f"{option} {spec}: importing {module_name} failed: {exc}", ExitCode.BAD_APP)
    except Exception as exc:  # the application's own import-time error, shown in one line
        fail(f"{option} {spec}: importing {module_name} failed: {describe(exc)}", ExitCode.BAD_APP)
    try:
        return getattr(module, attribute)
    except AttributeError:
        fail(f"{option} {spec}: module {module_name} has no {attribute!r}", ExitCode.BAD_APP)
