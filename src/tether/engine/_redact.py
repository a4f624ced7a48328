"""Masking secrets in error text before it is journaled.

The log is permanent and hash-chained: what reaches it can never be taken back. Error text
is the usual leak (an HTTP client's exception quoting the request, a driver's quoting its
connection string), so the runtime passes every tool error, model error and settlement
failure through a redactor first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping

__all__ = ("SECRET_SUFFIXES", "Redactor", "SecretRedactor")

Redactor = Callable[[str], str]
"""Rewrites error text before it is journaled (``str -> str``)."""

SECRET_SUFFIXES = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_MASK = "***"
_MIN_LENGTH = 4


class SecretRedactor:
    """Masks every occurrence of the given secret values as ``***``.

    Values shorter than ``min_length`` are ignored: masking ``1`` or ``on`` would mangle
    every message while protecting nothing. :meth:`from_env` takes the values of the
    environment variables named like secrets; it is the runtime's default.

    Example::

        redact = SecretRedactor.from_env({"OPENAI_API_KEY": "sk-live-4242", "HOME": "/root"})
        assert redact("401: bad key sk-live-4242") == "401: bad key ***"
        runtime = Runtime(agents, store, redact=redact)
    """

    def __init__(self, secrets: Iterable[str] = (), *, min_length: int = _MIN_LENGTH) -> None:
        kept = {value for value in secrets if len(value) >= min_length}
        # Longest first: a secret that contains another is masked whole.
        ordered = sorted(kept, key=lambda value: (-len(value), value))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self.count = len(ordered)
        """How many distinct values it masks (never the values themselves)."""

    @classmethod
    def from_env(
        cls,
        *environments: Mapping[str, str],
        suffixes: Iterable[str] = SECRET_SUFFIXES,
        min_length: int = _MIN_LENGTH,
    ) -> SecretRedactor:
        """Mask the values of the variables whose names end in one of ``suffixes`` (any case),
        read now from ``environments`` (``os.environ`` if none is given)."""
        endings = tuple(suffix.upper() for suffix in suffixes)
        sources = environments or (os.environ,)
        values = [
            value
            for environment in sources
            for name, value in environment.items()
            if name.upper().endswith(endings)
        ]
        return cls(values, min_length=min_length)

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(_MASK, text)

    def __repr__(self) -> str:
        return f"SecretRedactor({self.count} values)"
