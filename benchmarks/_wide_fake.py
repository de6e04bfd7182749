"""A fake Gemini for the scale benchmarks that a real provider would be: thousands of connections at
once, a latency held by a timer, and hardly any CPU of the machine under test.

:class:`~fabtest.testing.FakeGemini` is a ``ThreadingHTTPServer``: one thread per connection,
and a call waits its latency in a sleeping thread. At 5,000 conversations at once it served at
most 1,279 requests at once, took 59 s of CPU in 152 s from the 2 cores fabtest ran on, and its
slowest answer came 87 s after a request it should have answered after 2 s: the benchmark measured
its fake. :class:`WideFake` answers the same ``generateContent`` (streamed too) and ``countTokens``
requests with the same JSON, built by ``fabtest.testing.gemini_wire``'s own helpers, from one
asyncio event loop on a background thread: a connection is an ``asyncio.Protocol`` that cuts
HTTP/1.1 requests (keep-alive, ``Content-Length`` bodies) out of the bytes it receives, and
waiting is a timer (``loop.call_later``), not a sleeping thread. Not uvicorn: without ``httptools``
(not installed here) it parses HTTP with the pure-Python h11 and adds the ASGI layer's dicts and
coroutines per message; not asyncio's streams either (the first version): a task, futures and a
coroutine step per read cost more than the ``data_received`` and one timer a request costs here.

Benchmark-only: it has no rules or faults (a ``handler`` answers every call), and it keeps the
scripting interface bench_scale uses of FakeGemini (``handler``, ``latency``, ``requests``,
``reset()``, ``max_in_flight``, ``env()``, ``base_url``, a context manager).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from fabtest.testing.fake_gemini import _as_reply
from fabtest.testing.gemini_wire import FakeRequest, Reply, _error_body, _parse_request, _reply_payloads, count_tokens

__all__ = ["WideFake"]

#: Connections the kernel holds for the loop to accept (a provider's front end takes thousands;
#: FakeGemini's 128 overflowed and clients waited out SYN retransmits). The kernel caps it at
#: ``net.core.somaxconn``.
BACKLOG = 4096
_CLOSE = "Connection: close\r\n"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 411: "Length Required", 500: "Internal Server Error"}


class WideFake:
    """Gemini's REST API on 127.0.0.1, answering every call ``latency`` seconds after it arrived.

    ``handler(request)`` is called on the event loop and must not block: it returns a
    :class:`~fabtest.testing.gemini_wire.Reply`, a str, a JSON-able dict or list, or None (then
    ``default_text``), as FakeGemini's handler does.
    """

    def __init__(self, handler: Callable[[FakeRequest], Any] | None = None, *, latency: float = 0.0,
                 default_text: str = "OK", stream_chunks: int = 3) -> None:
        self.handler = handler
        self.latency = latency
        self.default_text = default_text
        self.stream_chunks = stream_chunks
        self._lock = threading.Lock()
        self._requests: list[FakeRequest] = []
        self._errors: list[str] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._connections: set[_Connection] = set()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> WideFake:
        """Bind a free port on 127.0.0.1 and serve from an event loop on a daemon thread."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failed: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(ready, failed), name="wide-fake", daemon=True)
        self._thread.start()
        ready.wait()
        if failed:
            self._thread = None
            raise failed[0]
        return self

    def stop(self) -> None:
        """Close the listener and every connection; calls still waiting their latency are dropped."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None or loop is None or stop is None:
            return
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        self._thread = self._loop = self._stop = None

    def __enter__(self) -> WideFake:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event, failed: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main(loop, ready))
        except BaseException as exc:  # a bind error goes back to start()
            failed.append(exc)
            ready.set()
        finally:
            loop.close()

    async def _main(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        server = await loop.create_server(lambda: _Connection(self), "127.0.0.1", 0, backlog=BACKLOG)
        self._port = int(server.sockets[0].getsockname()[1])
        self._loop, self._stop = loop, asyncio.Event()
        ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for connection in list(self._connections):
                connection.close()

    # -- what bench_scale reads ----------------------------------------------------------

    @property
    def port(self) -> int:
        if self._thread is None:
            raise RuntimeError("WideFake is not running: call start() or use it as a context manager")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, api_key: str = "fake-gemini-key") -> dict[str, str]:
        """Environment variables that point fabtest at this fake (as ``FakeGemini.env``)."""
        return {"GOOGLE_GEMINI_BASE_URL": self.base_url, "GEMINI_API_KEY": api_key}

    @property
    def requests(self) -> list[FakeRequest]:
        """A snapshot of every request received, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def max_in_flight(self) -> int:
        """The most requests that were ever being answered at the same time."""
        with self._lock:
            return self._max_in_flight

    @property
    def errors(self) -> list[str]:
        """Problems inside the fake (the handler raised, an unknown path)."""
        with self._lock:
            return list(self._errors)

    def reset(self) -> None:
        """Forget recorded requests, errors and the in-flight peak (the server keeps running)."""
        with self._lock:
            self._requests.clear()
            self._errors.clear()
            self._max_in_flight = self._in_flight

    def cpu_s(self) -> float:
        """CPU seconds the event loop's thread has used: everything this fake costs the machine."""
        if self._thread is None or self._thread.ident is None:
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(self._thread.ident))

    # -- serving (on the loop's thread) -------------------------------------------------

    def _arrived(self, connection: _Connection, method: str, target: str, headers: dict[str, str], raw: bytes,
                 close: bool) -> None:
        """A whole request came in: answer it now if it is wrong, else ``latency`` seconds from now."""
        if method != "POST":
            error = _error_body(404, f"FakeGemini only answers POST, not {method} {target}")
            return connection.send(_json_response(404, error, close), close)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return connection.send(_json_response(400, _error_body(400, "FakeGemini: request body is not JSON"),
                                                  close), close)
        request = _parse_request("POST", target, headers, body)
        if request is None:
            self._note_error(f"unknown path {target}")
            return connection.send(_json_response(404, _error_body(404, f"FakeGemini: unknown path {target}"),
                                                  close), close)
        with self._lock:
            self._requests.append(request)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        assert self._loop is not None
        self._loop.call_later(self.latency, self._due, connection, request, close)

    def _due(self, connection: _Connection, request: FakeRequest, close: bool) -> None:
        # no longer in flight before the answer goes out: the client may send its next request at once
        with self._lock:
            self._in_flight -= 1
        status, payloads = self._payloads(request)
        if request.stream and status == 200:
            connection.send(_sse_response(payloads, close), close)
        else:
            connection.send(_json_response(status, payloads[0], close), close)

    def _payloads(self, request: FakeRequest) -> tuple[int, list[dict[str, Any]]]:
        """(status, JSON bodies: one, or one per server-sent event) for a recorded request."""
        if request.action == "countTokens":
            return 200, [{"totalTokens": count_tokens(request.text)}]
        try:
            reply = _as_reply(self.handler(request)) if self.handler is not None else None
        except Exception as exc:  # report to the client and the benchmark
            self._note_error(f"callback raised {type(exc).__name__}: {exc}")
            return 500, [_error_body(500, f"FakeGemini callback raised {type(exc).__name__}: {exc}")]
        return 200, _reply_payloads(request, reply or Reply(text=self.default_text), model=request.model,
                                    stream_chunks=self.stream_chunks)

    def _note_error(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)


class _Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests cut out of the bytes as they arrive, keep-alive.

    A protocol, not asyncio's streams: a request costs one ``data_received`` and one timer, where
    a stream reader costs a task, futures and a coroutine step per read. Request bodies come with a
    ``Content-Length`` (httpx, the SDK's client, always sends one for JSON); a chunked one gets 411.
    """

    def __init__(self, fake: WideFake) -> None:
        self.fake = fake
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.fake._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None  # answers still due to it are dropped
        self.fake._connections.discard(self)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while self.transport is not None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buffer[:end].decode("latin-1").split("\r\n")
            method, target, version = (lines[0].split(" ", 2) + ["", ""])[:3]
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if "chunked" in headers.get("transfer-encoding", "").lower():
                return self.send(_json_response(411, _error_body(411, "send a Content-Length"), True), True)
            try:
                length = int(headers.get("content-length") or 0)
            except ValueError:
                return self.send(_json_response(400, _error_body(400, "bad Content-Length"), True), True)
            if len(self.buffer) < end + 4 + length:
                return  # the rest of the body is on its way
            raw = bytes(self.buffer[end + 4:end + 4 + length])
            del self.buffer[:end + 4 + length]
            close = version != "HTTP/1.1" or headers.get("connection", "").lower() == "close"
            self.fake._arrived(self, method, target, headers, raw, close)

    def send(self, data: bytes, close: bool) -> None:
        if self.transport is not None:
            self.transport.write(data)
            if close:
                self.transport.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _json_response(status: int, payload: dict[str, Any], close: bool) -> bytes:
    data = json.dumps(payload).encode()
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json; charset=UTF-8\r\n"
            f"Content-Length: {len(data)}\r\n{_CLOSE if close else ''}\r\n")
    return head.encode() + data


def _sse_response(payloads: list[dict[str, Any]], close: bool) -> bytes:
    """Server-sent events in one chunked body, as FakeGemini streams them (all at once: no delay between)."""
    out = [f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
           f"{_CLOSE if close else ''}\r\n".encode()]
    for payload in payloads:
        event = f"data: {json.dumps(payload)}\n\n".encode()
        out.append(f"{len(event):X}\r\n".encode() + event + b"\r\n")
    out.append(b"0\r\n\r\n")
    return b"".join(out)
