"""A router is a module-level object whose routes take the runtime by ``Depends``: one can be
mounted alone on an app of one's own, and the runtime of any app overridden."""

import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute

from tether.demo import demo_agents
from tether.engine import Runtime
from tether.http import create_app, runtime_dependency
from tether.http._insights import insights_router


def _one_agent() -> Runtime:
    return Runtime({"solo": demo_agents()["assistant"]}, "memory://")


async def _agents(app: FastAPI) -> list[str]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        answer = await client.get("/agents")
    assert answer.status_code == 200, answer.text
    return [agent["name"] for agent in answer.json()["agents"]]


async def test_a_router_mounted_alone_calls_the_runtime_it_is_given() -> None:
    app = FastAPI()
    app.include_router(insights_router)
    app.dependency_overrides[runtime_dependency] = _one_agent
    assert await _agents(app) == ["solo"]


async def test_an_apps_runtime_can_be_overridden() -> None:
    app = create_app(Runtime(demo_agents(), "memory://"))
    assert "solo" not in await _agents(app)
    app.dependency_overrides[runtime_dependency] = _one_agent
    assert await _agents(app) == ["solo"]


def _documented() -> list[tuple[str, list[int | str]]]:
    return [
        (route.path, list(route.responses))
        for route in insights_router.routes
        if isinstance(route, APIRoute)
    ]


def test_an_app_builds_its_own_routes_and_leaves_the_routers_as_they_are() -> None:
    before = _documented()
    app = create_app(Runtime(demo_agents(), "memory://"), auth_token="s3cret")
    assert _documented() == before and 401 not in dict(before)["/agents"]
    [mounted] = [r for r in app.router.routes if isinstance(r, APIRoute) and r.path == "/agents"]
    assert 401 in mounted.responses
    assert all(route is not mounted for route in insights_router.routes)


async def test_apps_of_one_kind_share_what_fastapi_built_and_not_their_overrides() -> None:
    """An app copies the routes built for the first app of its kind (building is most of an
    app's creation): each copy resolves dependencies through its own app's overrides."""
    first, second = (create_app(Runtime(demo_agents(), "memory://")) for _ in range(2))
    second.dependency_overrides[runtime_dependency] = _one_agent
    assert "solo" not in await _agents(first)
    assert await _agents(second) == ["solo"]

    def agents_route(app: FastAPI) -> APIRoute:
        [route] = [r for r in app.router.routes if isinstance(r, APIRoute) and r.path == "/agents"]
        return route

    built, copied = agents_route(first), agents_route(second)
    assert copied is not built and copied.dependant is built.dependant
    # With auth, the routes differ (each asks for its scope and documents 401): built apart.
    guarded = agents_route(create_app(Runtime(demo_agents(), "memory://"), auth_token="s3cret"))
    assert guarded.dependant is not built.dependant and 401 in guarded.responses
