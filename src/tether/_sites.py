"""Which sites may use the HTTP server (docs/serving.md): the ``Host`` names it answers to,
and the ``Origin``s that may change things. The HTTP layer's Guard asks it of every request;
``tether serve`` checks its flags with it before it opens anything.

A page of another site can make a browser send requests here. Two things keep it out:

- *DNS rebinding*: a page on a name its author controls, rebound to this server's address,
  sends that name as ``Host``. The server answers only the loopback names, the address the
  connection came in on (an IP literal: no page's origin but this server's own), and the
  hosts it was told to allow.
- *Cross-site requests*: a request that changes something carries the ``Origin`` of the page
  that sent it; only the server's own (the request's ``Host``, whatever the scheme: behind a
  TLS proxy the browser says https and the server sees http) and those it was told to allow
  may.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ("SitePolicy",)

_ANY = "*"
"""As an allowed host or origin: any at all (something in front checks them)."""
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
"""The names every server answers to, with any port."""
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_-]+(\.[a-z0-9_-]+)*)(:[0-9]{1,5})?")


@dataclass(frozen=True, slots=True)
class SitePolicy:
    """The hosts and origins a server takes, normalized (lower case, IPv6 in brackets)."""

    hosts: frozenset[str]
    """Names (any port) and ``name:port`` pairs; the loopback names among them."""
    any_host: bool
    origins: frozenset[str]
    """``scheme://host[:port]``, besides the server's own."""
    any_origin: bool

    @classmethod
    def of(
        cls, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()
    ) -> SitePolicy:
        """The policy that allows these (a ``ValueError`` names one that is neither a host
        nor an origin).

        Example::

            SitePolicy.of(["agents.example.com"], ["https://app.example.com"])
        """
        hosts = [_host(given) for given in allowed_hosts]
        origins = [_origin(given) for given in allowed_origins]
        return cls(
            hosts=frozenset((*_LOOPBACK_HOSTS, *hosts)) - {_ANY},
            any_host=_ANY in hosts,
            origins=frozenset(origins) - {_ANY},
            any_origin=_ANY in origins,
        )

    def serves(self, host: str, server: tuple[str, int | None] | None) -> bool:
        """Whether a request naming ``host`` is for this server; ``server`` is the address
        the connection came in on (the ASGI scope's)."""
        if self.any_host:
            return True
        authority = host.lower()
        if authority in self.hosts:
            return True
        if authority[:1] == "[":  # [::1]:8484
            name = authority[: authority.find("]") + 1]
        else:
            name = authority.partition(":")[0]
        if name in self.hosts:
            return True
        if server is None:
            return False
        address = server[0].lower()
        return name == (f"[{address}]" if ":" in address else address)

    def trusts(self, origin: str, host: str | None) -> bool:
        """Whether a page of ``origin`` may change things through a request naming ``host``:
        the server's own origin, or one allowed. ``null`` (a sandboxed frame, a redirect
        across sites) is nobody's."""
        if self.any_origin:
            return True
        origin = origin.lower()
        if origin in self.origins:
            return True
        _, separator, authority = origin.partition("://")
        return bool(separator) and host is not None and authority == host.lower()


def _host(given: str) -> str:
    host = given.strip().lower()
    if host == _ANY:
        return host
    try:  # a bare IPv6 address: the Host header writes it in brackets
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            return f"[{host}]"
    except ValueError:
        pass
    if not _HOST.fullmatch(host):
        raise ValueError(
            f"allowed host {given!r} is not a host name or address (with a port, or not): "
            "e.g. agents.example.com, 10.0.0.5:8484, [2001:db8::1], or * for any"
        )
    return host


def _origin(given: str) -> str:
    origin = given.strip().lower().rstrip("/")
    if origin == _ANY:
        return origin
    parts = urlsplit(origin)
    if (
        parts.scheme not in ("http", "https")
        or not parts.netloc
        or parts.path
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
        or not _HOST.fullmatch(parts.netloc)
    ):
        raise ValueError(
            f"allowed origin {given!r} is not an origin: scheme://host[:port], e.g. "
            "https://app.example.com, or * for any"
        )
    return f"{parts.scheme}://{parts.netloc}"
