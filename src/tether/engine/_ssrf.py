"""Where an outbound webhook may be sent: ``http``/``https`` URLs whose host resolves only to
public addresses (SSRF). Private, loopback, link-local (the cloud metadata service),
shared, multicast, reserved and unspecified ranges are refused, every address the name
resolves to checked, unless a network of ``WebhookSettings.allow`` holds the address (tests
allow ``127.0.0.0/8``)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from typing import Final
from urllib.parse import SplitResult, urlsplit

from tether.errors import InvalidDispatch

__all__ = (
    "Address",
    "Network",
    "check_webhook_url",
    "networks_of",
    "refused",
    "resolve_webhook_host",
)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_MAX_URL: Final = 2048
_RESOLVE_SECONDS: Final = 5.0
"""How long a name may take to resolve (a dispatch waits for it)."""

_REFUSED: Final[tuple[Network, ...]] = tuple(
    ipaddress.ip_network(cidr)
    for cidr in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",  # shared address space (carrier NAT)
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local: 169.254.169.254 is the cloud metadata service
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "::ffff:0:0/96",  # IPv4-mapped: checked as the IPv4 address it maps
        "64:ff9b::/96",
        "100::/64",
        "2001:db8::/32",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)


def networks_of(allow: Sequence[str]) -> tuple[Network, ...]:
    """The allowed networks (CIDR strings); ``ValueError`` for one that is not."""
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in allow)


def refused(address: Address, allow: Sequence[Network]) -> bool:
    """Whether a webhook may not be sent to ``address``."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allow if network.version == address.version):
        return False
    return any(address in network for network in _REFUSED if network.version == address.version)


def _split(url: str) -> SplitResult:
    if len(url) > _MAX_URL:
        raise InvalidDispatch(f"at most {_MAX_URL} characters", field="callback.url")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a malformed port raises here)
    except ValueError:
        raise InvalidDispatch("not a URL", field="callback.url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidDispatch("must be an http or https URL with a host", field="callback.url")
    if parts.username is not None or parts.password is not None:
        raise InvalidDispatch("must not carry credentials", field="callback.url")
    if any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        raise InvalidDispatch("must not contain spaces or control characters", field="callback.url")
    return parts


async def resolve_webhook_host(
    url: str, allow: Sequence[Network], *, unresolved_ok: bool = False
) -> list[Address]:
    """The addresses ``url``'s host resolves to, every one of them allowed; else
    ``InvalidDispatch`` (field ``callback.url``) saying why. A name that does not resolve
    is refused too, unless ``unresolved_ok`` (then: no addresses)."""
    parts = _split(url)
    host = parts.hostname
    assert host is not None  # checked by _split
    try:
        addresses: list[Address] = [ipaddress.ip_address(host)]
    except ValueError:
        if host.lower().rstrip(".") in (
            "localhost",
            "localhost.localdomain",
        ) or host.lower().endswith(".localhost"):
            addresses = [ipaddress.ip_address("127.0.0.1")]
        else:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            try:
                async with asyncio.timeout(_RESOLVE_SECONDS):
                    infos = await asyncio.get_running_loop().getaddrinfo(
                        host, port, type=socket.SOCK_STREAM
                    )
            except (OSError, UnicodeError, TimeoutError) as exc:
                if unresolved_ok:
                    return []
                raise InvalidDispatch(
                    f"unresolved: {host!r} does not resolve ({exc})", field="callback.url"
                ) from None
            addresses = []
            for info in infos:
                address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
                if address not in addresses:
                    addresses.append(address)
    bad = [address for address in addresses if refused(address, allow)]
    if bad:
        raise InvalidDispatch(
            f"refused: {host!r} resolves to a private, loopback or link-local address "
            f"({', '.join(map(str, bad))}); allow it with WebhookSettings.allow",
            field="callback.url",
        )
    return addresses


async def check_webhook_url(url: str, allow: Sequence[Network]) -> None:
    """Refuse (``InvalidDispatch``) a callback URL that is malformed, not ``http(s)``, or
    whose host is a refused address; a name that does not resolve now is let through (it is
    resolved and checked again at each attempt)."""
    await resolve_webhook_host(url, allow, unresolved_ok=True)
