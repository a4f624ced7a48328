"""``/docs`` and ``/redoc`` work offline: every asset they load comes from this server
(issue 18, item 18)."""

import re
from collections.abc import Callable
from typing import Any

import pytest

from tether.demo import demo_agents

from .conftest import Server

Serve = Callable[..., Any]
_ASSET = re.compile(r"""(?:src|href)=["']([^"']+)["']|url:\s*['"]([^'"]+)['"]""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_docs_pages_load_only_local_assets(asgi: Serve, page: str) -> None:
    server: Server = await asgi(demo_agents())
    c = server.client
    html = await c.get(page)
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assets = [a or b for a, b in _ASSET.findall(html.text)]
    assert any(a.endswith(".js") for a in assets), html.text
    assert "/openapi.json" in html.text
    for asset in assets:
        assert asset.startswith("/"), f"{page} loads {asset} from elsewhere"
        response = await c.get(asset)
        assert response.status_code == 200, asset
        assert len(response.content) > 0, asset
    assert "http://" not in html.text and "https://" not in html.text
