"""Schemathesis fuzzes every operation of the OpenAPI document: no input makes a 5xx.

Every run draws the same few examples per operation; ``TETHER_SOAK=1`` draws more, new ones
each run, and ``TETHER_FUZZ_EXAMPLES`` sets how many.
"""

import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from tether.demo import demo_agents
from tether.engine import Runtime
from tether.http import create_app

from ..engine.conftest import FAST

schemathesis = pytest.importorskip("schemathesis")
GenerationMode = schemathesis.GenerationMode

SOAK = bool(os.environ.get("TETHER_SOAK"))
EXAMPLES = int(os.environ.get("TETHER_FUZZ_EXAMPLES", "250" if SOAK else "10"))
# The followed stream never ends by design; its bad inputs are in the table tests.
SKIP = {("GET", "/agents/{agent}/{instance}")}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:  # restored when the module is done
        if "TETHER_DEMO_RESEARCH_SECONDS" not in os.environ:
            patch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.05")
        yield from _serve_demo(tmp_path_factory)


def _serve_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    runtime = Runtime(demo_agents(), f"sqlite:///{tmp_path_factory.mktemp('fuzz')}", **FAST)
    app = create_app(runtime, manage_runtime=True)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        while not server.started:
            assert thread.is_alive(), "the fuzzed server did not start"
            thread.join(0.02)
        seed = {"body": "seed"}
        httpx.post(f"{url}/agents/assistant/me", params={"wait": True}, json=seed, timeout=90)
        yield url
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


def _openapi() -> dict[str, Any]:
    openapi: dict[str, Any] = create_app(Runtime(demo_agents(), "memory://")).openapi()
    return openapi


@pytest.fixture(scope="module")
def schema() -> Any:
    """The document, parsed once for every operation's test."""
    return schemathesis.openapi.from_dict(_openapi())


def _operations() -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, methods in _openapi()["paths"].items()
        for method in methods
        if (method.upper(), path) not in SKIP
    ]


@pytest.mark.parametrize("mode", ["positive", "negative"])
@pytest.mark.parametrize(("method", "path"), _operations())
def test_no_input_is_a_server_error(
    base_url: str, schema: Any, method: str, path: str, mode: str
) -> None:
    operation = schema[path][method]
    seen: list[int] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=not SOAK,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(GenerationMode(mode)), wait=st.just(0.2))
    def fuzz(case: object, wait: float) -> None:
        query = getattr(case, "query", None)
        if isinstance(query, dict) and "wait" in query:
            query["timeout"] = wait  # never let ?wait hold a fuzz request open for long
        response = case.call(base_url=base_url, timeout=30)  # type: ignore[attr-defined]
        seen.append(response.status_code)
        assert response.status_code < 500, (case, response.text)
        if response.status_code >= 400:
            assert set(response.json()) == {"error"}, response.text

    try:
        fuzz()
    except Unsatisfiable:
        pytest.skip(f"{method} {path} has no input that can be made invalid")
    assert seen
