"""The ``tether`` command line (typer): ``serve``, ``worker``, ``send``, ``tail``, ``approvals``,
``approve``, ``records``, ``spans``, ``verify``, ``replay`` (``replay --against``: the deploy
gate), ``fork``. Run ``tether --help``."""

from tether.cli._main import app, main

__all__ = ("app", "main")
