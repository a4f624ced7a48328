"""The hosts and origins a server takes (``tether._sites``), case by case; the Guard's use of
them is in tests/http/test_guard_sites.py."""

import pytest

from tether._sites import SitePolicy

DEFAULT = SitePolicy.of()


@pytest.mark.parametrize(
    ("host", "server", "served"),
    [
        ("[::1]:8484", None, True),
        ("[fd00::2]:8484", ("fd00::2", 8484), True),  # the connection's own IPv6 address
        ("[FD00::2]", ("fd00::2", 8484), True),
        ("[fd00::3]:8484", ("fd00::2", 8484), False),
        ("192.0.2.2:8484", ("192.0.2.2", 8484), True),
        ("192.0.2.2.rebound.example:8484", ("192.0.2.2", 8484), False),
        ("[::1", None, False),  # malformed
        ("localhost.", None, False),
        ("", ("192.0.2.2", 8484), False),
    ],
)
def test_the_hosts_served_by_default(
    host: str, server: tuple[str, int] | None, served: bool
) -> None:
    assert DEFAULT.serves(host, server) is served


def test_allowed_hosts_are_normalized() -> None:
    policy = SitePolicy.of(["2001:DB8::1", " Agents.Example.COM ", "proxy.lan:8443"])
    assert policy.serves("[2001:db8::1]:443", None)
    assert policy.serves("agents.example.com", None)
    assert policy.serves("proxy.lan:8443", None) and not policy.serves("proxy.lan:8444", None)


@pytest.mark.parametrize(
    ("origin", "host", "trusted"),
    [
        ("http://localhost:8484", "localhost:8484", True),
        ("https://localhost:8484", "localhost:8484", True),  # the scheme is not compared
        ("http://localhost:8485", "localhost:8484", False),
        ("http://localhost:8484", None, False),
        ("null", "localhost:8484", False),
        ("localhost:8484", "localhost:8484", False),
    ],
)
def test_the_server_s_own_origin(origin: str, host: str | None, trusted: bool) -> None:
    assert DEFAULT.trusts(origin, host) is trusted


def test_a_star_allows_any() -> None:
    policy = SitePolicy.of(["*"], ["*"])
    assert policy.serves("anything.example", None) and policy.trusts("null", None)
