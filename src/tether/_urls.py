"""Printing a URL without its secrets (store URLs carry database passwords)."""

from __future__ import annotations

import re

__all__ = ("redact_url",)

# The password of a URL's user info, wherever the URL stands in the text: everything between
# the user's ``:`` and the last ``@`` before the path (an unencoded ``@`` in a password still
# ends at the host's one).
_USERINFO_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)[^/?#\s]*(?=@)")
# ``password=...`` as a URL query option or a libpq ``key=value`` setting (quoted or not).
_PASSWORD_SETTING = re.compile(
    r"(?P<head>\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&#]+)", re.IGNORECASE
)
MASK = "***"


def redact_url(url: str) -> str:
    """``url`` (or any text holding URLs, such as an error message) with every password
    masked, fit for a log line, a banner or an error message.

    Example::

        >>> redact_url("postgresql://tether:s3cret@db:5432/tether?sslmode=require")
        'postgresql://tether:***@db:5432/tether?sslmode=require'
        >>> redact_url("postgresql://db/tether?user=tether&password=s3cret")
        'postgresql://db/tether?user=tether&password=***'
    """
    url = _USERINFO_PASSWORD.sub(rf"\g<head>{MASK}", url)
    return _PASSWORD_SETTING.sub(rf"\g<head>{MASK}", url)
