"""``tether serve --otlp-endpoint``: spans reach a real OTLP/HTTP collector, under the
caller's trace."""

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ..cli.conftest import start_server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Collector(HTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[Span] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.server.spans.extend(scope.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_spans_are_exported_over_otlp_under_the_callers_trace(
    tmp_path: Path, collector: Collector
) -> None:
    server = start_server(
        tmp_path / "data", tmp_path / "serve.log", "--otlp-endpoint", collector.url
    )
    try:
        accepted = httpx.post(
            f"{server.url}/agents/assistant/me",
            params={"wait": True},
            json={"body": "research tides"},
            headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
            timeout=90,
        )
        assert accepted.json()["status"] == "succeeded", accepted.text
        deadline = time.monotonic() + 60
        while not any(s.name.startswith("execute_tool") for s in collector.spans):
            assert time.monotonic() < deadline, [s.name for s in collector.spans]
            time.sleep(0.1)
    finally:
        server.stop()
    by_name = {span.name: span for span in collector.spans}
    agent = by_name["invoke_agent assistant"]
    assert agent.trace_id.hex() == TRACE_ID and agent.parent_span_id.hex() == PARENT_ID
    assert {"chat echo", "execute_tool research"} <= set(by_name)
    assert all(span.trace_id.hex() == TRACE_ID for span in collector.spans)
