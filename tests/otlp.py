"""A real OTLP/HTTP trace receiver on 127.0.0.1 for tests: it decodes what exporters send (protobuf, the
protocol's own messages) and keeps each span as a plain dict. It can be made slow or failing, which a
real backend cannot be made on demand."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


@dataclass
class Receiver:
    url: str
    spans: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    delay: float = 0.0  # seconds each export waits before its answer
    status: int = 200
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(
        default_factory=list
    )  # every export's path: /v1/traces, and claude's /v1/metrics, /v1/logs
    others: list[tuple[str, bytes]] = field(default_factory=list)  # what came to another path than /v1/traces

    def log_resources(self) -> list[dict[str, Any]]:
        """The resource attributes of every batch of log records exported to /v1/logs (claude's events)."""
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        with self.lock:
            bodies = [body for path, body in self.others if path == "/v1/logs"]
        return [
            {kv.key: _value(kv.value) for kv in rl.resource.attributes}
            for body in bodies
            for rl in ExportLogsServiceRequest.FromString(body).resource_logs
        ]

    def log_attributes(self) -> list[dict[str, Any]]:
        """The attributes of every log record exported to /v1/logs (claude's events), resource's included."""
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        out = []
        with self.lock:
            bodies = [body for path, body in self.others if path == "/v1/logs"]
        for body in bodies:
            for rl in ExportLogsServiceRequest.FromString(body).resource_logs:
                resource = {kv.key: _value(kv.value) for kv in rl.resource.attributes}
                for sl in rl.scope_logs:
                    out += [{**resource, **{kv.key: _value(kv.value) for kv in r.attributes}} for r in sl.log_records]
        return out

    lock: threading.Lock = field(default_factory=threading.Lock)

    def named(self, prefix: str) -> list[dict[str, Any]]:
        with self.lock:
            return [s for s in self.spans if s["name"].startswith(prefix)]

    def wait_for(self, predicate: Any, timeout: float = 60) -> list[dict[str, Any]]:
        """Until `predicate(spans)` holds (the exporter sends in batches, from its own thread)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the receiver has {len(spans)} spans, not what was awaited: {sorted({s['name'] for s in spans})}"
                )
            time.sleep(0.05)


@contextmanager
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            """How many exports have come in (answered or not): for a process to wait on."""
            body = str(state.requests).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with state.lock:
                state.requests += 1
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
                state.paths.append(self.path)
            if state.delay:
                time.sleep(state.delay)
            if self.path != "/v1/traces":
                with state.lock:
                    state.others.append((self.path, body))
            if self.path != "/v1/traces" or state.status != 200:
                self.send_response(state.status if self.path == "/v1/traces" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            request = ExportTraceServiceRequest.FromString(body)
            got = []
            for rs in request.resource_spans:
                resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        got.append(
                            {
                                "name": s.name,
                                "trace_id": s.trace_id.hex(),
                                "span_id": s.span_id.hex(),
                                "parent_id": s.parent_span_id.hex() or None,
                                "kind": s.kind,
                                "start": s.start_time_unix_nano,
                                "end": s.end_time_unix_nano,
                                "attributes": {kv.key: _value(kv.value) for kv in s.attributes},
                                "status": s.status.code,
                                "status_message": s.status.message,
                                "events": [e.name for e in s.events],
                                "links": [link.span_id.hex() for link in s.links],
                                "resource": resource,
                            }
                        )
            with state.lock:
                state.spans.extend(got)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
