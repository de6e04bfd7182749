"""An OTLP/HTTP trace receiver on 127.0.0.1: the spans an agent under test exports, by trace id.

An agent that runs as a black box (behind HTTP, in another process) reports its tool calls in its
OpenTelemetry spans. It exports them to this receiver (``OTEL_EXPORTER_OTLP_ENDPOINT=
http://127.0.0.1:4318``, the OTLP/HTTP default) and :mod:`fabtest.agents.trace_calls` reads the
spans of each turn from here. ``POST /v1/traces`` takes the two OTLP/HTTP encodings: JSON
(``application/json``, ids in hex) and protobuf (``application/x-protobuf``, decoded with
``opentelemetry-proto``, which the ``otel`` extra installs; without it a protobuf body is answered
415 and the agent should export JSON: ``OTEL_EXPORTER_OTLP_PROTOCOL=http/json``). Bodies may be
gzip-compressed: they are inflated a piece at a time and refused (413) as soon as they pass
:data:`MAX_BODY`, so a small body that inflates to gigabytes never fills the memory. Only loopback
addresses are served; a body that is too large, truncated, not valid gzip or nested too deeply is
answered 413 or 400, never a dropped connection.

A turn's trace is *expected* (:meth:`Receiver.expect`) from the moment its ``traceparent`` is made
until its spans were read: when more than :data:`MAX_TRACES` traces arrive (another service
exporting to the same port, a flood), the traces nobody expects are dropped first, oldest first,
so foreign traffic cannot push a turn's own spans out.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fabtest.errors import FabtestError, UsageError

__all__ = ["DEFAULT_PORT", "BodyTooLarge", "Receiver", "Span", "inflate", "protobuf_available", "receiver"]

#: the port OTLP/HTTP exporters send to when nothing else is configured
DEFAULT_PORT = 4318
#: the largest request body accepted (bytes, after decompression)
MAX_BODY = 32 * 1024 * 1024
#: spans kept per trace at most (an agent that loops cannot fill the memory)
MAX_SPANS_PER_TRACE = 10_000
#: traces kept at most; the oldest trace no turn expects is dropped first
MAX_TRACES = 2_000


class BodyTooLarge(FabtestError, ValueError):
    """A request body over :data:`MAX_BODY` bytes, as sent or once inflated (answered 413)."""


@dataclass(frozen=True)
class Span:
    """The parts of a received span fabtest reads."""

    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16 lowercase hex digits
    parent_id: str  # "" for a root span
    name: str
    start_ns: int = 0
    end_ns: int = 0
    attributes: Mapping[str, Any] = field(default_factory=dict)
    error: bool = False  # status code ERROR
    scope: str = ""  # the instrumentation scope's name


def protobuf_available() -> bool:
    try:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401
    except ImportError:
        return False
    return True


class Receiver:
    """Spans received so far, by trace id, and the HTTP server that receives them."""

    def __init__(self, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise UsageError(f"[tool.fabtest.traces]: the receiver listens on loopback only, not {host!r}")
        self._traces: dict[str, list[Span]] = {}
        #: the trace ids turns are waiting for, with how many turns wait for each (never dropped)
        self._expected: dict[str, int] = {}
        self._changed = threading.Condition()
        try:
            self._server = ThreadingHTTPServer((host, port), _handler(self))
        except OSError as exc:
            raise UsageError(f"[tool.fabtest.traces] port = {port}: cannot receive traces on {host}:{port} "
                             f"({exc.strerror or exc}); another process (another fabtest run, a collector) "
                             "may hold it: stop it or set another port and point the agent's "
                             "OTEL_EXPORTER_OTLP_ENDPOINT at it") from None
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.endpoint = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fabtest-otlp", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, spans: list[Span]) -> None:
        with self._changed:
            for span in spans:
                kept = self._traces.setdefault(span.trace_id, [])
                if len(kept) < MAX_SPANS_PER_TRACE:
                    kept.append(span)
            excess = len(self._traces) - MAX_TRACES
            if excess > 0:  # the oldest foreign traces go; a trace a turn expects stays
                foreign = [t for t in self._traces if t not in self._expected][:excess]
                for trace_id in foreign:
                    del self._traces[trace_id]
            self._changed.notify_all()

    def expect(self, trace_id: str) -> None:
        """A turn waits for ``trace_id``: its spans are kept whatever else arrives, until :meth:`release`."""
        with self._changed:
            self._expected[trace_id] = self._expected.get(trace_id, 0) + 1

    def release(self, trace_id: str) -> None:
        """The turn read its spans: ``trace_id`` may be dropped like any other trace again."""
        with self._changed:
            left = self._expected.get(trace_id, 0) - 1
            if left > 0:
                self._expected[trace_id] = left
            else:
                self._expected.pop(trace_id, None)

    def spans(self, trace_id: str) -> list[Span]:
        with self._changed:
            return list(self._traces.get(trace_id, ()))

    def wait(self, trace_id: str, done: Any, timeout: float) -> list[Span]:
        """The spans of ``trace_id`` once ``done(spans)`` is true, or when ``timeout`` seconds passed."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                spans = list(self._traces.get(trace_id, ()))
                left = deadline - time.monotonic()
                if done(spans) or left <= 0:
                    return spans
                self._changed.wait(left)

    def forget(self, trace_id: str) -> None:
        with self._changed:
            self._traces.pop(trace_id, None)


_lock = threading.Lock()
_receivers: dict[int, Receiver] = {}


def receiver(port: int = DEFAULT_PORT) -> Receiver:
    """The process's receiver on ``port``, started on first use (it lives as long as the process)."""
    with _lock:
        found = _receivers.get(port)
        if found is None:
            found = _receivers[port] = Receiver(port)
            if port == 0:
                _receivers[found.port] = found
        return found


# -- the HTTP side -------------------------------------------------------------------------------------
def _handler(target: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        #: seconds a connection may sit without sending: a body shorter than its Content-Length ends
        #: in a 400, not a thread waiting forever
        timeout = 10

        def do_POST(self) -> None:  # the http.server name
            if self.path.split("?")[0].rstrip("/") != "/v1/traces":
                return self._reply(404, b"only /v1/traces is received here", "text/plain")
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            try:
                body = self._body()
                if kind == "application/json":
                    target.add(spans_from_json(json.loads(body)))
                    return self._reply(200, b"{}", "application/json")
                if kind in ("application/x-protobuf", "application/protobuf"):
                    if not protobuf_available():
                        return self._reply(415, b"protobuf needs opentelemetry-proto (pip install "
                                                b"'pytest-fabtest[otel]'); export JSON: "
                                                b"OTEL_EXPORTER_OTLP_PROTOCOL=http/json",
                                           "text/plain")
                    target.add(spans_from_protobuf(body))
                    return self._reply(200, b"", "application/x-protobuf")
            except BodyTooLarge as exc:
                return self._reply(413, str(exc).encode(), "text/plain")
            except (ValueError, TypeError, KeyError, AttributeError, OSError, EOFError, zlib.error) as exc:
                return self._reply(400, f"bad OTLP body: {type(exc).__name__}: {exc}"[:300].encode(), "text/plain")
            except RecursionError:
                return self._reply(400, b"bad OTLP body: nested too deeply", "text/plain")
            return self._reply(415, b"Content-Type must be application/json or application/x-protobuf", "text/plain")

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            if length < 0:
                raise ValueError(f"Content-Length {length}")
            if length > MAX_BODY:
                raise BodyTooLarge(f"body of {length} bytes (at most {MAX_BODY})")
            body = self.rfile.read(length)
            if len(body) < length:
                raise ValueError(f"body of {len(body)} bytes, {length} announced")
            if (self.headers.get("Content-Encoding") or "").strip().lower() == "gzip":
                body = inflate(body, MAX_BODY)
            return body

        def _reply(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

    return Handler


def inflate(data: bytes, limit: int) -> bytes:
    """A gzip body (one member or several), inflated at most ``limit`` bytes: :class:`BodyTooLarge`
    past it, before more is inflated; ``ValueError`` for a truncated or broken one."""
    out = bytearray()
    rest = data
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16+: a gzip header and trailer
        out += inflater.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise BodyTooLarge(f"body of more than {limit} bytes once decompressed")
        if not inflater.eof:
            raise ValueError("the gzip body is truncated (no end of stream)")
        rest = inflater.unused_data
        if not rest.strip(b"\0"):  # gzip.decompress also ignores trailing zero padding
            return bytes(out)


# -- the two encodings ---------------------------------------------------------------------------------
def spans_from_json(data: Any) -> list[Span]:
    """An OTLP/JSON ``ExportTraceServiceRequest``: ids are hex strings, values ``{"stringValue": ...}``."""
    out = []
    for rs in _list(data, "resourceSpans", "resource_spans"):
        for ss in _list(rs, "scopeSpans", "scope_spans"):
            scope = ss.get("scope") or {}
            for span in _list(ss, "spans"):
                status = span.get("status") or {}
                code = status.get("code")
                out.append(Span(
                    trace_id=_hex(span.get("traceId", span.get("trace_id"))),
                    span_id=_hex(span.get("spanId", span.get("span_id"))),
                    parent_id=_hex(span.get("parentSpanId", span.get("parent_span_id")) or ""),
                    name=str(span.get("name", "")),
                    start_ns=int(span.get("startTimeUnixNano", span.get("start_time_unix_nano")) or 0),
                    end_ns=int(span.get("endTimeUnixNano", span.get("end_time_unix_nano")) or 0),
                    attributes={a["key"]: _json_value(a.get("value") or {}) for a in _list(span, "attributes")},
                    error=code in (2, "STATUS_CODE_ERROR"),
                    scope=str(scope.get("name", "")) if isinstance(scope, Mapping) else "",
                ))
    return out


def _list(data: Any, *keys: str) -> list[Any]:
    if not isinstance(data, Mapping):
        raise TypeError(f"expected an object, got {type(data).__name__}")
    for key in keys:
        if key in data:
            value = data[key]
            if not isinstance(value, list):
                raise TypeError(f"{key} is not a list")
            return value
    return []


def _hex(value: Any) -> str:
    text = str(value or "").lower()
    if text and not all(c in "0123456789abcdef" for c in text):
        raise ValueError(f"id {text[:40]!r} is not hex")
    return text


def _json_value(value: Mapping[str, Any]) -> Any:
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])  # 64-bit ints are strings in OTLP/JSON
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [_json_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return {kv["key"]: _json_value(kv.get("value") or {}) for kv in (value["kvlistValue"] or {}).get("values", [])}
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def spans_from_protobuf(body: bytes) -> list[Span]:
    """An OTLP/protobuf ``ExportTraceServiceRequest`` (``opentelemetry-proto``)."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    try:
        request = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise ValueError(str(exc)) from None
    return [Span(trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), parent_id=span.parent_span_id.hex(),
                 name=span.name, start_ns=span.start_time_unix_nano,
                 attributes={a.key: _proto_value(a.value) for a in span.attributes},
                 error=span.status.code == 2, scope=ss.scope.name)
            for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


def _proto_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def iter_descendants(spans: list[Span], parent_id: str) -> Iterator[Span]:
    """The spans under ``parent_id`` (children, their children, ...), each once."""
    children: dict[str, list[Span]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    stack, seen = list(children.get(parent_id, ())), set()
    while stack:
        span = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        yield span
        stack.extend(children.get(span.span_id, ()))
