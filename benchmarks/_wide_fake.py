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

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _wide_http import Connection, WideServer, json_response, sse_response

from fabtest.testing.fake_gemini import _as_reply
from fabtest.testing.gemini_wire import FakeRequest, Reply, _error_body, _parse_request, _reply_payloads, count_tokens

__all__ = ["WideFake"]


class WideFake(WideServer):
    """Gemini's REST API on 127.0.0.1, answering every call ``latency`` seconds after it arrived.

    ``handler(request)`` is called on the event loop and must not block: it returns a
    :class:`~fabtest.testing.gemini_wire.Reply`, a str, a JSON-able dict or list, or None (then
    ``default_text``), as FakeGemini's handler does.
    """

    def __init__(self, handler: Callable[[FakeRequest], Any] | None = None, *, latency: float = 0.0,
                 default_text: str = "OK", stream_chunks: int = 3) -> None:
        super().__init__(latency)
        self.handler = handler
        self.default_text = default_text
        self.stream_chunks = stream_chunks
        self._requests: list[FakeRequest] = []
        self._errors: list[str] = []

    # -- what bench_scale reads ----------------------------------------------------------

    def env(self, api_key: str = "fake-gemini-key") -> dict[str, str]:
        """Environment variables that point fabtest at this fake (as ``FakeGemini.env``)."""
        return {"GOOGLE_GEMINI_BASE_URL": self.base_url, "GEMINI_API_KEY": api_key}

    @property
    def requests(self) -> list[FakeRequest]:
        """A snapshot of every request received, oldest first."""
        with self._lock:
            return list(self._requests)

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
        self.reset_peak()

    # -- serving (on the loop's thread) -------------------------------------------------

    def arrived(self, connection: Connection, method: str, target: str, headers: dict[str, str], raw: bytes,
                 close: bool) -> None:
        """A whole request came in: answer it now if it is wrong, else ``latency`` seconds from now."""
        if method != "POST":
            return _fail(connection, 404, f"FakeGemini only answers POST, not {method} {target}", close)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return _fail(connection, 400, "FakeGemini: request body is not JSON", close)
        request = _parse_request("POST", target, headers, body)
        if request is None:
            self._note_error(f"unknown path {target}")
            return _fail(connection, 404, f"FakeGemini: unknown path {target}", close)
        with self._lock:
            self._requests.append(request)
        self.answer_later(connection, close, lambda: self._answer(request, close))

    def _answer(self, request: FakeRequest, close: bool) -> bytes:
        status, payloads = self._payloads(request)
        if request.stream and status == 200:
            return sse_response(payloads, close)
        return json_response(status, payloads[0], close)

    def _payloads(self, request: FakeRequest) -> tuple[int, list[dict[str, Any]]]:
        """(status, JSON bodies: one, or one per server-sent event) for a recorded request."""
        prompt_tokens = count_tokens(request.text)
        if request.action == "countTokens":
            return 200, [{"totalTokens": prompt_tokens}]
        try:
            reply = _as_reply(self.handler(request)) if self.handler is not None else None
        except Exception as exc:  # report to the client and the benchmark
            self._note_error(f"callback raised {type(exc).__name__}: {exc}")
            return 500, [_error_body(500, f"FakeGemini callback raised {type(exc).__name__}: {exc}")]
        return 200, _reply_payloads(request, reply or Reply(text=self.default_text), prompt_tokens=prompt_tokens,
                                    model=request.model, stream_chunks=self.stream_chunks)

    def _note_error(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)


def _fail(connection: Connection, status: int, message: str, close: bool) -> None:
    """Answer at once with Gemini's error body, as FakeGemini does."""
    connection.send(json_response(status, _error_body(status, message), close), close)
