"""``TETHER_MODEL`` (and ``TETHER_MODEL_TIMEOUT``), checked when ``serve`` or ``worker``
starts: a bad one fails there, in one line and with an exit code of its own, not at the first
request (``replay`` checks the model too, without the key)."""

from __future__ import annotations

import os

import typer

from tether.cli._exit import ExitCode, fail

__all__ = ("check_model",)


def check_model(*, build_client: bool = True) -> None:
    """Build the model ``TETHER_MODEL`` names (its provider's client, so its key is checked);
    exit with :attr:`ExitCode.BAD_MODEL` if it cannot be. Says which model is used.

    ``build_client=False`` (``replay``, which asks no model) checks the name and the
    provider's package only, and says nothing. A live one checks ``TETHER_MODEL_TIMEOUT``
    too, whatever the model."""
    from tether.models import ModelConfigError, check_model_env, model_timeout_from_env

    if build_client:
        try:
            model_timeout_from_env()
        except ModelConfigError as exc:
            fail(str(exc), ExitCode.BAD_MODEL)
    if not os.environ.get("TETHER_MODEL", "").strip():
        return  # the keyless models: nothing to import or check
    try:
        name = check_model_env(build_client=build_client)
    except ModelConfigError as exc:
        fail(str(exc), ExitCode.BAD_MODEL)
    if build_client:
        typer.echo(f"tether model {name} (from TETHER_MODEL)", err=True)
