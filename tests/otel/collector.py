"""A local OTLP/HTTP receiver on 127.0.0.1: ``POST /v1/traces`` bodies decoded as the
collector's own protobuf (``ExportTraceServiceRequest``), kept as plain spans to assert on."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

__all__ = ("Collector", "Received", "collector", "values")

KINDS = {
    Span.SpanKind.SPAN_KIND_INTERNAL: "INTERNAL",
    Span.SpanKind.SPAN_KIND_SERVER: "SERVER",
    Span.SpanKind.SPAN_KIND_CLIENT: "CLIENT",
    Span.SpanKind.SPAN_KIND_PRODUCER: "PRODUCER",
    Span.SpanKind.SPAN_KIND_CONSUMER: "CONSUMER",
}
STATUSES = {
    Status.StatusCode.STATUS_CODE_UNSET: "UNSET",
    Status.StatusCode.STATUS_CODE_OK: "OK",
    Status.StatusCode.STATUS_CODE_ERROR: "ERROR",
}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, which) if which is not None else None


def values(attributes: Any) -> dict[str, Any]:
    """Protobuf ``KeyValue`` attributes as a dict (arrays as lists)."""
    pairs: list[KeyValue] = list(attributes)
    return {pair.key: _value(pair.value) for pair in pairs}


@dataclass(frozen=True)
class Received:
    """One span as the collector decoded it (ids as hex, kind and status as their names)."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status: str
    status_message: str
    service: str | None

    @classmethod
    def of(cls, span: Span, resource: dict[str, Any]) -> Received:
        return cls(
            name=span.name,
            kind=KINDS[span.kind],
            trace_id=span.trace_id.hex(),
            span_id=span.span_id.hex(),
            parent_span_id=span.parent_span_id.hex(),
            attributes=values(span.attributes),
            events=[(event.name, values(event.attributes)) for event in span.events],
            status=STATUSES[span.status.code],
            status_message=span.status.message,
            service=resource.get("service.name"),
        )


class Collector(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[Received] = []
        self.posts: list[str] = []
        """``path content-type`` of each export received."""
        self.changed = threading.Condition()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def receive(self, post: str, request: ExportTraceServiceRequest) -> None:
        with self.changed:
            self.posts.append(post)
            for resource in request.resource_spans:
                described = values(resource.resource.attributes)
                for scope in resource.scope_spans:
                    self.spans.extend(Received.of(span, described) for span in scope.spans)
            self.changed.notify_all()

    def wait_for(
        self, done: Callable[[list[Received]], bool], timeout: float = 60
    ) -> list[Received]:
        """The spans once ``done`` holds of them (a deadline, not a timing assertion: a loaded
        machine only makes it wait longer)."""
        with self.changed:
            if not self.changed.wait_for(lambda: done(list(self.spans)), timeout=timeout):
                raise AssertionError(f"spans never arrived; got {[s.name for s in self.spans]}")
            return list(self.spans)

    def named(self, name: str) -> list[Received]:
        with self.changed:
            return [span for span in self.spans if span.name == name]


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest.FromString(body)
        self.server.receive(f"{self.path} {self.headers['Content-Type']}", request)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

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
