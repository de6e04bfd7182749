"""The Gemini REST wire format, and the HTTP server of :class:`~fabtest.testing.FakeGemini` that speaks it.

What a request looks like to the fake (:class:`FakeRequest`), a scripted answer (:class:`Reply`),
and the handler that turns a reply or a fault into Gemini's JSON or server-sent events: the HTTP
side of the fake, apart from its scripting (rules, faults, the default answer) in
``fake_gemini.py``.
"""

from __future__ import annotations

import json as _json
import re
import socket
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

__all__ = ["MISSING", "FakeRequest", "Handler", "Reply", "Served", "Server", "count_tokens"]

#: "no JSON scripted" (None is a JSON value a rule may script)
MISSING: Any = object()
_PATH = re.compile(r"/(v1(?:beta|alpha)?\d*)/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$")
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass
class FakeRequest:
    """One request the fake received.

    ``text`` is what rules are matched against: the system instruction and every content part
    (text, or the JSON of function calls/responses) joined by newlines. ``prompt`` is the same
    without the system instruction.
    """

    method: str
    path: str
    model: str
    api_version: str
    action: str
    body: dict[str, Any]
    text: str
    system: str
    prompt: str
    stream: bool
    #: Request headers with lower-cased names (the key arrives as ``x-goog-api-key``).
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def generation_config(self) -> dict[str, Any]:
        return self.body.get("generationConfig") or {}

    @property
    def wants_json(self) -> bool:
        """True when the caller asked for structured (JSON) output."""
        return self.generation_config.get("responseMimeType") == "application/json"

    @property
    def schema(self) -> dict[str, Any] | None:
        """The requested response schema (``responseJsonSchema`` or ``responseSchema``), if any."""
        config = self.generation_config
        return config.get("responseJsonSchema") or config.get("responseSchema")

    @property
    def temperature(self) -> float | None:
        return self.generation_config.get("temperature")

    @property
    def contents(self) -> list[dict[str, Any]]:
        """The request's ``contents`` (the conversation, function calls and responses included)."""
        return list(self.body.get("contents") or [])

    @property
    def last_user_text(self) -> str:
        """The text of the latest user message that is not a function response."""
        for content in reversed(self.contents):
            texts = [str(p["text"]) for p in content.get("parts") or [] if "text" in p]
            if content.get("role", "user") == "user" and texts:
                return "\n".join(texts)
        return ""

    @property
    def tool_rounds(self) -> int:
        """Function-response turns since the latest user text: 0 on the first call of a tool loop."""
        rounds = 0
        for content in reversed(self.contents):
            parts = content.get("parts") or []
            if content.get("role", "user") == "user" and any("text" in p for p in parts):
                break
            if any("functionResponse" in p for p in parts):
                rounds += 1
        return rounds

    @property
    def function_responses(self) -> list[dict[str, Any]]:
        """The ``{name, response}`` the caller sent back in its latest turn (empty if it sent text)."""
        contents = self.contents
        if not contents:
            return []
        return [p["functionResponse"] for p in contents[-1].get("parts") or [] if "functionResponse" in p]

    @property
    def tool_names(self) -> list[str]:
        """Names of the function declarations the caller offered."""
        return [d.get("name", "") for tool in self.body.get("tools") or []
                for d in tool.get("functionDeclarations") or []]


@dataclass
class Reply:
    """A scripted answer. Give any of ``text``, ``json`` (serialised as the text) or function calls.

    ``function_call`` is ``{"name": ..., "args": {...}}`` or a list of them; they come after
    the text in the candidate's parts. ``finish_reason`` is copied into the candidate.
    """

    text: str | None = None
    json: Any = MISSING
    function_call: dict[str, Any] | list[dict[str, Any]] | None = None
    finish_reason: str = "STOP"

    def candidate_text(self) -> str:
        if self.json is not MISSING:
            return _json.dumps(self.json)
        return self.text or ""

    def function_calls(self) -> list[dict[str, Any]]:
        if self.function_call is None:
            return []
        return list(self.function_call) if isinstance(self.function_call, list) else [self.function_call]


def count_tokens(text: str) -> int:
    """The fake's token count: words, roughly what a tokenizer would give for English."""
    return len(text.split())


def _part_text(part: dict[str, Any]) -> str:
    if "text" in part:
        return str(part["text"])
    for key in ("functionCall", "functionResponse", "inlineData", "executableCode", "codeExecutionResult"):
        if key in part:
            return _json.dumps({key: part[key]}, sort_keys=True)
    return ""


def _parse_request(method: str, raw_path: str, headers: dict[str, str], body: dict[str, Any]) -> FakeRequest | None:
    split = urlsplit(raw_path)
    match = _PATH.search(split.path)
    if not match:
        return None
    version, model, action = match.groups()
    system_parts = (body.get("systemInstruction") or {}).get("parts") or []
    system = "\n".join(t for t in (_part_text(p) for p in system_parts) if t)
    contents = body.get("contents") or (body.get("generateContentRequest") or {}).get("contents") or []
    prompt = "\n".join(t for c in contents for t in (_part_text(p) for p in (c.get("parts") or [])) if t)
    text = "\n".join(t for t in (system, prompt) if t)
    stream = action == "streamGenerateContent"
    return FakeRequest(
        method=method,
        path=raw_path,
        model=model,
        api_version=version,
        action=action,
        body=body,
        text=text,
        system=system,
        prompt=prompt,
        stream=stream or parse_qs(split.query).get("alt") == ["sse"],
        headers=headers,
    )


def _usage(prompt_tokens: int, answer_tokens: int) -> dict[str, int]:
    return {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": answer_tokens,
        "totalTokenCount": prompt_tokens + answer_tokens,
    }


def _response(parts: list[dict[str, Any]], *, finish: str | None, usage: dict[str, int], model: str,
              rid: str) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": rid}


def _error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": _STATUS_NAMES.get(status, "UNKNOWN")}}


class _Fault(Protocol):
    """An injected failure as the server reads it (:class:`fabtest.testing.fake_gemini.Fault` is one)."""

    @property
    def kind(self) -> int | str: ...

    @property
    def delay_s(self) -> float | None: ...


class Served(Protocol):
    """What the server needs of the fake it serves (:class:`~fabtest.testing.FakeGemini` is one).

    A protocol rather than an import keeps the wire format below ``fake_gemini``, which starts the server.
    """

    @property
    def latency(self) -> float: ...

    @property
    def model_version(self) -> str | None: ...

    @property
    def stream_chunks(self) -> int: ...

    @property
    def timeout_fault_s(self) -> float: ...

    def _enter(self) -> None: ...

    def _leave(self) -> None: ...

    def _record(self, request: FakeRequest) -> None: ...

    def _note_error(self, message: str) -> None: ...

    def _pick_fault(self, request: FakeRequest) -> _Fault | None: ...

    def _pick_reply(self, request: FakeRequest) -> Reply: ...

    def _sleep(self, seconds: float) -> bool: ...


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # A provider's front end accepts thousands of connections at once. With 128 waiting, a run of
    # 5,000 conversations overflowed the queue while this one thread accepted: the kernel dropped
    # the SYNs, each client waited its 1, 3, 7, 15 s retransmits, and the slowest "call" took 38x
    # the latency the fake was set to. The kernel caps this at net.core.somaxconn.
    request_queue_size = 4096

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], fake: Served) -> None:
        self.fake = fake
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, each reply waited ~40 ms for
    # the client's delayed ACK, which distorted every latency the fake is meant to control.
    disable_nagle_algorithm = True
    server: Server

    def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
        """Silence per-request logging."""

    def do_GET(self) -> None:  # stdlib naming
        self._send_json(404, _error_body(404, f"FakeGemini only answers POST, not GET {self.path}"))

    def do_POST(self) -> None:  # stdlib naming
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = _json.loads(raw or b"{}")
        except ValueError:
            self._send_json(400, _error_body(400, "FakeGemini: request body is not JSON"))
            return
        request = _parse_request("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        if request is None:
            fake._note_error(f"unknown path {self.path}")
            self._send_json(404, _error_body(404, f"FakeGemini: unknown path {self.path}"))
            return
        fake._record(request)
        fake._enter()
        self._counted: Served | None = fake
        try:
            self._answer(fake, request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout fault, usually)
        finally:
            self._answered()

    def _answered(self) -> None:
        """The request stops being in flight just before its last bytes go out: once the client has
        them it may send the next request at once, before this thread would have got to a ``finally``
        (``max_in_flight`` then counted one request twice under load)."""
        fake, self._counted = getattr(self, "_counted", None), None
        if fake is not None:
            fake._leave()

    def _answer(self, fake: Served, request: FakeRequest) -> None:
        if fake._sleep(fake.latency):
            return
        model = fake.model_version or request.model
        prompt_tokens = count_tokens(request.text)
        if request.action == "countTokens":
            self._send_json(200, {"totalTokens": prompt_tokens})
            return
        fault = fake._pick_fault(request)
        reply: Reply | None = None
        if fault is not None:
            if isinstance(fault.kind, int):
                self._send_json(fault.kind, _error_body(fault.kind, f"FakeGemini injected HTTP {fault.kind}"))
                return
            if fault.kind == "timeout":
                delay = fault.delay_s if fault.delay_s is not None else fake.timeout_fault_s
                if fake._sleep(delay):
                    return
            elif fault.kind == "malformed_json":
                reply = Reply(text='{"fabtest_fake": "malformed", "unterminated": [1, 2,')
            elif fault.kind == "wrong_schema":
                reply = Reply(json={"fabtest_fake": "this object does not match the schema"})
            elif fault.kind == "empty":
                reply = Reply(text="")
            elif fault.kind == "blocked":
                blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": _usage(prompt_tokens, 0),
                           "modelVersion": model, "responseId": uuid.uuid4().hex[:16]}
                if request.stream:
                    self._send_sse([blocked])
                else:
                    self._send_json(200, blocked)
                return
        if reply is None:
            try:
                reply = fake._pick_reply(request)
            except Exception as exc:  # report to the client and the test
                fake._note_error(f"callback raised {type(exc).__name__}: {exc}")
                self._send_json(500, _error_body(500, f"FakeGemini callback raised {type(exc).__name__}: {exc}"))
                return
        payloads = _reply_payloads(request, reply, prompt_tokens=prompt_tokens, model=model,
                                   stream_chunks=fake.stream_chunks)
        if request.stream:
            self._send_sse(payloads)
        else:
            self._send_json(200, payloads[0])

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = _json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._answered()
        self.wfile.write(data)

    def _send_sse(self, chunks: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in chunks:
            event = f"data: {_json.dumps(chunk)}\n\n".encode()
            self.wfile.write(f"{len(event):X}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
        self._answered()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _reply_payloads(request: FakeRequest, reply: Reply, *, prompt_tokens: int, model: str,
                    stream_chunks: int) -> list[dict[str, Any]]:
    """The JSON a reply is sent as: one response, or one per server-sent event when streamed (the
    text in ``stream_chunks`` pieces, then the function calls). ``prompt_tokens``: the request's
    :func:`count_tokens`, which the caller has counted already. The benchmarks' asyncio fake sends
    the same bodies from here."""
    text = reply.candidate_text()
    calls = reply.function_calls()
    answer_tokens = count_tokens(text) + sum(count_tokens(_json.dumps(c)) for c in calls)
    usage = _usage(prompt_tokens, answer_tokens)
    rid = uuid.uuid4().hex[:16]
    call_parts = [{"functionCall": call} for call in calls]
    if not request.stream:
        parts = ([{"text": text}] if text or not calls else []) + call_parts
        return [_response(parts, finish=reply.finish_reason, usage=usage, model=model, rid=rid)]
    pieces = _split(text, stream_chunks) if text else ([] if calls else [""])
    events = [[{"text": piece}] for piece in pieces] + ([call_parts] if call_parts else [])
    return [_response(parts, finish=reply.finish_reason if i == len(events) - 1 else None, usage=usage, model=model,
                      rid=rid)
            for i, parts in enumerate(events)]


def _split(text: str, pieces: int) -> list[str]:
    """Split text into at most ``pieces`` consecutive chunks that join back to it exactly."""
    words = re.findall(r"\S+\s*|\s+", text)
    pieces = max(1, min(pieces, len(words)))
    size = -(-len(words) // pieces)
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]
