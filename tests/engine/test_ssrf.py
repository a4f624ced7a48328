"""Where an outbound webhook may go (``engine/_ssrf``): every address a host resolves to is
checked against the refusal list (loopback, private, link-local, shared, reserved...),
IPv4-mapped IPv6 as its IPv4 address, names by what they resolve to; an allowed network
lets its addresses through."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import pytest

from tether.engine._ssrf import check_webhook_url, networks_of, refused, resolve_webhook_host
from tether.errors import InvalidDispatch


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
        "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00::1",
        "::ffff:127.0.0.1", "::ffff:10.0.0.1", "ff02::1",
    ],
)  # fmt: skip
def test_private_addresses_are_refused(address: str) -> None:
    assert refused(ipaddress.ip_address(address), ())


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700::1111"])
def test_public_addresses_are_not(address: str) -> None:
    assert not refused(ipaddress.ip_address(address), ())


def test_an_allowed_network_lets_its_addresses_through() -> None:
    allow = networks_of(["127.0.0.0/8", "fd00::/8"])
    assert not refused(ipaddress.ip_address("127.0.0.5"), allow)
    assert not refused(ipaddress.ip_address("::ffff:127.0.0.1"), allow)
    assert not refused(ipaddress.ip_address("fd00::7"), allow)
    assert refused(ipaddress.ip_address("10.0.0.1"), allow)
    with pytest.raises(ValueError):
        networks_of(["not a network"])


async def test_a_name_is_checked_by_every_address_it_resolves_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = {
        "public.example": ["93.184.216.34"],
        "mixed.example": ["93.184.216.34", "10.1.2.3"],  # one private address is enough
        "decimal": ["127.0.0.1"],  # what a resolver makes of http://2130706433/
    }

    async def getaddrinfo(host: str, port: int, **_: Any) -> list[Any]:
        if host not in answers:
            raise socket.gaierror("no such name")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    found = await resolve_webhook_host("https://public.example/hook", ())
    assert found == [ipaddress.ip_address("93.184.216.34")]
    for url in ("https://mixed.example/", "http://decimal/", "http://LOCALHOST./x"):
        with pytest.raises(InvalidDispatch, match="refused"):
            await resolve_webhook_host(url, ())
    with pytest.raises(InvalidDispatch, match="does not resolve"):
        await resolve_webhook_host("https://nowhere.example/", ())
    await check_webhook_url("https://nowhere.example/", ())  # checked again at each attempt
    with pytest.raises(InvalidDispatch, match="refused"):
        await check_webhook_url("https://mixed.example/", ())


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("file:///etc/passwd", "http or https"),
        ("http:///nohost", "http or https"),
        ("http://a b.example/", "spaces"),
        ("http://example.com:99999/", "not a URL"),
        ("http://u@example.com/", "credentials"),
        ("https://example.com/" + "x" * 3000, "characters"),
    ],
)
async def test_malformed_urls_are_refused(url: str, why: str) -> None:
    with pytest.raises(InvalidDispatch, match=why):
        await check_webhook_url(url, ())
