"""HTTP/1.1 on one asyncio event loop on a background thread, answering each request after a delay
on a timer: the serving half of the benchmarks' wide fakes (``_wide_fake.WideFake`` for Gemini,
peer_scenario's for the OpenAI-compatible peer). Standard library only, so the peer's scratch
virtualenv, which has no fabtest, can use it too.

Why a loop and not a thread per connection, and why a protocol and not asyncio's streams or
uvicorn: ``_wide_fake``'s docstring.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing.Self is 3.11's; the peer's scratch virtualenv may be older
    from typing import Self

__all__ = ["BACKLOG", "Connection", "WideServer", "json_response", "sse_response"]

#: Connections the kernel holds for the loop to accept (a provider's front end takes thousands;
#: FakeGemini's 128 overflowed and clients waited out SYN retransmits). The kernel caps it at
#: ``net.core.somaxconn``.
BACKLOG = 4096
_CLOSE = "Connection: close\r\n"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 411: "Length Required", 500: "Internal Server Error"}


class WideServer:
    """Serves 127.0.0.1 from an event loop on a daemon thread; a subclass answers in :meth:`arrived`,
    at once (:meth:`Connection.send`) or after ``latency`` seconds (:meth:`answer_later`)."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self._lock = threading.Lock()
        self._in_flight = 0
        self._max_in_flight = 0
        self._port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._connections: set[Connection] = set()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
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

    def __enter__(self) -> Self:
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
        server = await loop.create_server(lambda: Connection(self), "127.0.0.1", 0, backlog=BACKLOG)
        self._port = int(server.sockets[0].getsockname()[1])
        self._loop, self._stop = loop, asyncio.Event()
        ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for connection in list(self._connections):
                connection.close()

    @property
    def port(self) -> int:
        if self._thread is None:
            raise RuntimeError(f"{type(self).__name__} is not running: call start() or use it as a context manager")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def max_in_flight(self) -> int:
        """The most requests that were ever being answered at the same time."""
        with self._lock:
            return self._max_in_flight

    def reset_peak(self) -> None:
        """Start the in-flight peak again from the requests in flight now."""
        with self._lock:
            self._max_in_flight = self._in_flight

    def cpu_s(self) -> float:
        """CPU seconds the event loop's thread has used: everything the server costs the machine."""
        if self._thread is None or self._thread.ident is None:
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(self._thread.ident))

    def arrived(self, connection: Connection, method: str, target: str, headers: dict[str, str], raw: bytes,
                close: bool) -> None:
        """A whole request came in (``headers`` with lower-cased names); answer it. On the loop's thread."""
        raise NotImplementedError

    def answer_later(self, connection: Connection, close: bool, answer: Callable[[], bytes]) -> None:
        """Send ``answer()`` ``latency`` seconds from now; the request counts as in flight until then."""
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        assert self._loop is not None
        self._loop.call_later(self.latency, self._due, connection, close, answer)

    def _due(self, connection: Connection, close: bool, answer: Callable[[], bytes]) -> None:
        # no longer in flight before the answer goes out: the client may send its next request at once
        with self._lock:
            self._in_flight -= 1
        connection.send(answer(), close)


class Connection(asyncio.Protocol):
    """One client connection: HTTP/1.1 requests cut out of the bytes as they arrive, keep-alive.

    A protocol, not asyncio's streams: a request costs one ``data_received`` and one timer, where
    a stream reader costs a task, futures and a coroutine step per read. Request bodies come with a
    ``Content-Length`` (httpx, the SDK's client, always sends one for JSON); a chunked one gets 411.
    """

    def __init__(self, server: WideServer) -> None:
        self.server = server
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None  # answers still due to it are dropped
        self.server._connections.discard(self)

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
                return self.refuse(411, "send a Content-Length")
            try:
                length = int(headers.get("content-length") or 0)
            except ValueError:
                return self.refuse(400, "bad Content-Length")
            if len(self.buffer) < end + 4 + length:
                return  # the rest of the body is on its way
            raw = bytes(self.buffer[end + 4:end + 4 + length])
            del self.buffer[:end + 4 + length]
            close = version != "HTTP/1.1" or headers.get("connection", "").lower() == "close"
            self.server.arrived(self, method, target, headers, raw, close)

    def send(self, data: bytes, close: bool) -> None:
        if self.transport is not None:
            self.transport.write(data)
            if close:
                self.transport.close()

    def refuse(self, status: int, message: str) -> None:
        """Answer a request this server cannot read, and close: what follows it cannot be framed."""
        self.send(json_response(status, {"error": {"code": status, "message": message}}, True), True)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def json_response(status: int, payload: dict[str, Any], close: bool) -> bytes:
    data = json.dumps(payload).encode()
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json; charset=UTF-8\r\n"
            f"Content-Length: {len(data)}\r\n{_CLOSE if close else ''}\r\n")
    return head.encode() + data


def sse_response(payloads: list[dict[str, Any]], close: bool) -> bytes:
    """Server-sent events in one chunked body, as FakeGemini streams them (all at once: no delay between)."""
    out = [f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
           f"{_CLOSE if close else ''}\r\n".encode()]
    for payload in payloads:
        event = f"data: {json.dumps(payload)}\n\n".encode()
        out.append(f"{len(event):X}\r\n".encode() + event + b"\r\n")
    out.append(b"0\r\n\r\n")
    return b"".join(out)
