"""The web console's files (issue 23, item 1): ``/`` redirects to ``/ui``, which serves the
page from the package, with its scripts and styles, nothing from elsewhere, nothing to build."""

import re
from collections.abc import AsyncIterator, Callable
from importlib.resources import files
from typing import Any

import pytest

from tether.demo import demo_agents
from tether.store import MemoryStore, Store

from .conftest import Server

Serve = Callable[..., Any]
CONSOLE = files("tether.http") / "console"
# A module's imports, and the page's own references to its files.
IMPORT = re.compile(r"""^import .*? from "\./([\w.-]+)";$|^import "\./([\w.-]+)";$""", re.M)
REFERENCE = re.compile(r"""(?:src|href)="/ui/([\w.-]+)\"""")


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """What the files are does not depend on the store: the in-memory one serves."""
    yield MemoryStore()


def _shipped() -> dict[str, str]:
    return {
        entry.name: entry.read_text()
        for entry in CONSOLE.iterdir()
        if entry.name.endswith((".html", ".js", ".css"))
    }


async def test_the_root_redirects_to_the_console_page(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    home = await server.client.get("/")
    assert home.status_code == 307 and home.headers["location"] == "/ui"
    page = await server.client.get("/", follow_redirects=True)
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>Tether console</title>" in page.text


async def test_every_file_the_page_names_is_served_from_the_package(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    shipped = _shipped()
    named = set(REFERENCE.findall(shipped["index.html"]))
    for name, text in shipped.items():
        if name.endswith(".js"):
            named |= {a or b for a, b in IMPORT.findall(text)}
    assert {"app.js", "console.css"} <= named
    assert named <= set(shipped), named - set(shipped)  # no module imports a missing file
    for name in named:
        answer = await server.client.get(f"/ui/{name}")
        assert answer.status_code == 200, name
        assert answer.content == shipped[name].encode(), name
    kinds = {
        (await server.client.get(f"/ui/{name}")).headers["content-type"]
        for name in ("app.js", "console.css")
    }
    assert kinds == {"text/javascript; charset=utf-8", "text/css; charset=utf-8"}


def test_nothing_is_loaded_from_elsewhere() -> None:
    """No CDN, no web font, no remote script: every URL the files hold is this server's."""
    for name, text in _shipped().items():
        assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), name
        assert "@import" not in text and "url(http" not in text, name


async def test_the_page_is_served_with_a_strict_policy_and_an_etag(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    page = await server.client.get("/ui")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-cache"
    again = await server.client.get("/ui", headers={"If-None-Match": page.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    other = await server.client.get("/ui/app.js", headers={"If-None-Match": page.headers["etag"]})
    assert other.status_code == 200  # each file has its own tag


async def test_an_unknown_console_file_is_a_404_envelope(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents())
    for path in ("/ui/nope.js", "/ui/%2e%2e/pyproject.toml", "/ui/console/app.js"):
        answer = await server.client.get(path)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["type"] == "not_found"


async def test_with_a_token_the_page_loads_and_the_api_still_asks(asgi: Serve) -> None:
    server: Server = await asgi(demo_agents(), auth_token="s3cret")
    c = server.client
    assert (await c.get("/ui")).status_code == 200
    assert (await c.get("/ui/app.js")).status_code == 200
    assert (await c.get("/")).status_code == 307
    assert (await c.get("/sessions")).status_code == 401
    assert (await c.get("/agents")).status_code == 401
