"""A local stand-in for the Gemini REST API, so LLM paths are tested without the internet.

:class:`FakeGemini` is an HTTP server on ``127.0.0.1`` (random free port, one thread per
connection) that answers ``POST /{v1,v1beta,v1alpha}/models/{model}:generateContent``,
``:streamGenerateContent?alt=sse`` and ``:countTokens`` the way Gemini does, so the *real*
google-genai client (and the Gemini CLI) can talk to it::

    from google import genai
    from google.genai import types
    from fabtest.testing import FakeGemini

    with FakeGemini() as fake:
        fake.add_rule(r"capital of France", text="Paris")
        fake.add_rule(r"Grade this", json={"passed": True, "reason": "fine"})
        fake.add_fault(429, times=2)                 # the next two calls are rate limited
        client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=fake.base_url))
        client.models.generate_content(model="gemini-2.5-flash", contents="capital of France?")
        assert fake.requests[-1].text == "capital of France?"

or through the environment, which fabtest's Gemini provider and the SDK both honour::

    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.base_url)
    monkeypatch.setenv("GEMINI_API_KEY", "fake-key")      # or: for k, v in fake.env().items(): ...

How a reply is chosen, per request:

1. **Faults** (:meth:`FakeGemini.add_fault`) first: the first fault whose pattern matches and
   that has uses left fires (HTTP 429/500/any status, ``"timeout"``, ``"malformed_json"``,
   ``"wrong_schema"``, ``"empty"``, ``"blocked"``).
2. **Rules** (:meth:`FakeGemini.add_rule`, :meth:`FakeGemini.add_tool_script`) in the order added: the first whose regex is found in
   the request text (system instruction + every content part, joined by newlines) and that has
   uses left answers with text, JSON, a function call, or whatever its callback returns.
3. The ``handler`` given to the constructor, if any (a callback for every request).
4. Otherwise the default: ``default_json`` for JSON-mode requests when set, else
   ``default_text``.

JSON-mode requests (``responseMimeType: application/json``, with or without
``responseSchema`` / ``responseJsonSchema``) get a rule's ``json`` serialised as the candidate
text, which is what the real API does. Every response carries ``usageMetadata`` (tokens counted
roughly as words) and ``modelVersion``. Every request is recorded in :attr:`FakeGemini.requests`.
"""

from __future__ import annotations

import json as _json
import os
import re
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeGemini", "FakeRequest", "Fault", "Reply", "Rule"]

_MISSING: Any = object()
_PATH = re.compile(r"/(v1(?:beta|alpha)?\d*)/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$")
#: The longest a ``"timeout"`` fault ever sleeps, so a forgotten fault cannot hang a test run.
MAX_FAULT_SLEEP_S = 30.0
FAULT_KINDS = ("timeout", "malformed_json", "wrong_schema", "empty", "blocked")
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
    json: Any = _MISSING
    function_call: dict[str, Any] | list[dict[str, Any]] | None = None
    finish_reason: str = "STOP"

    def candidate_text(self) -> str:
        if self.json is not _MISSING:
            return _json.dumps(self.json)
        return self.text or ""

    def function_calls(self) -> list[dict[str, Any]]:
        if self.function_call is None:
            return []
        return list(self.function_call) if isinstance(self.function_call, list) else [self.function_call]


#: What callbacks may return: a Reply, a str (text), a dict/list (JSON), or None (fall through).
ReplyLike = Reply | str | dict[str, Any] | list[Any] | None
Callback = Callable[[FakeRequest], ReplyLike]


@dataclass
class Rule:
    """A scripted reply for requests whose text matches ``pattern`` (see :meth:`FakeGemini.add_rule`)."""

    pattern: re.Pattern[str]
    reply: Reply | None = None
    callback: Callback | None = None
    times: int | None = None
    model: str | None = None
    hits: int = 0

    def matches(self, request: FakeRequest) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.model is not None and self.model != request.model:
            return False
        return self.pattern.search(request.text) is not None


@dataclass
class Fault:
    """An injected failure (see :meth:`FakeGemini.add_fault`)."""

    kind: int | str
    times: int | None = 1
    pattern: re.Pattern[str] | None = None
    delay_s: float | None = None
    hits: int = 0

    def matches(self, request: FakeRequest) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return self.pattern is None or self.pattern.search(request.text) is not None


def count_tokens(text: str) -> int:
    """The fake's token count: words, roughly what a tokenizer would give for English."""
    return len(text.split())


class FakeGemini:
    """A scripted Gemini REST server on 127.0.0.1 for tests (see the module docstring).

    Use as a context manager or call :meth:`start` / :meth:`stop`. Thread-safe: rules, faults,
    records and counters are guarded by one lock, so tests can add rules while requests run.

    Attributes you may set at any time:

    - ``default_text``: the answer when nothing else matches (default ``"OK"``).
    - ``default_json``: the answer for JSON-mode requests when nothing matches (default unset,
      so ``default_text`` is used).
    - ``latency``: seconds every call waits before answering (interruptible by :meth:`stop`).
    - ``stream_chunks``: how many SSE events a streamed text answer is split into (default 3).
    - ``timeout_fault_s``: how long a ``"timeout"`` fault sleeps unless given ``delay_s``
      (capped at 30 s; :meth:`stop` wakes it).
    """

    def __init__(
        self,
        handler: Callback | None = None,
        *,
        default_text: str = "OK",
        latency: float = 0.0,
        model_version: str | None = None,
    ) -> None:
        self.handler = handler
        self.default_text = default_text
        self.default_json: Any = _MISSING
        self.latency = latency
        self.stream_chunks = 3
        self.timeout_fault_s = MAX_FAULT_SLEEP_S
        self.model_version = model_version
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._faults: list[Fault] = []
        self._requests: list[FakeRequest] = []
        self._errors: list[str] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> FakeGemini:
        """Bind a free port on 127.0.0.1 and serve in a background thread. Returns self."""
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="FakeGemini", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake sleeping faults and close open connections. Safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeGemini is not running: call start() or use it as a context manager")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: pass to ``HttpOptions(base_url=...)`` or ``GOOGLE_GEMINI_BASE_URL``."""
        return f"http://127.0.0.1:{self.port}"

    def env(self, api_key: str = "fake-gemini-key") -> dict[str, str]:
        """Environment variables that point fabtest (and the Gemini CLI) at this fake."""
        return {"GOOGLE_GEMINI_BASE_URL": self.base_url, "GEMINI_API_KEY": api_key}

    def gemini_cli_env(self, home: str | os.PathLike[str], api_key: str = "fake-key") -> dict[str, str]:
        """The environment for the real Gemini CLI to run offline against this fake: ``home`` gets a
        ``.gemini/settings.json`` selecting gemini-api-key auth with telemetry and updates off; proxies
        point at a dead port as a second fence against reaching the internet."""
        settings_dir = Path(home) / ".gemini"
        settings_dir.mkdir(parents=True, exist_ok=True)
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        }
        (settings_dir / "settings.json").write_text(_json.dumps(settings))
        return {
            **self.env(api_key),
            "HOME": str(home),
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
            "NO_COLOR": "1",
            "GOOGLE_CLOUD_PROJECT": "",
            "GOOGLE_API_KEY": "",
            "GOOGLE_GENAI_USE_VERTEXAI": "",
        }

    # -- scripting -----------------------------------------------------------------------

    def add_rule(
        self,
        pattern: str | re.Pattern[str],
        *,
        text: str | None = None,
        json: Any = _MISSING,
        function_call: dict[str, Any] | list[dict[str, Any]] | None = None,
        callback: Callback | None = None,
        times: int | None = None,
        model: str | None = None,
    ) -> Rule:
        """Answer requests whose text matches ``pattern`` (``re.search``, DOTALL).

        Give exactly one of ``text``, ``json`` or ``callback``, or a ``function_call``
        (``{"name": ..., "args": {...}}``, optionally with ``text`` before it). A callback gets the
        :class:`FakeRequest` and returns a :class:`Reply`, a str, a JSON-able dict/list, or None
        to fall through to later rules. ``times=N`` retires the rule after N uses; ``model``
        restricts it to one model name. Returns the rule (its ``hits`` counts uses).
        """
        given = sum(x is not None for x in (text, callback)) + (json is not _MISSING)
        if callback is not None and (given > 1 or function_call is not None):
            raise ValueError("a callback rule takes no text/json/function_call")
        if json is not _MISSING and (text is not None or function_call is not None):
            raise ValueError("give json alone, or text and/or function_call")
        if given == 0 and function_call is None:
            raise ValueError("add_rule needs text=, json=, function_call= or callback=")
        reply = None if callback else Reply(text=text, json=json, function_call=function_call)
        rule = Rule(_compile(pattern), reply=reply, callback=callback, times=times, model=model)
        with self._lock:
            self._rules.append(rule)
        return rule

    def add_tool_script(
        self,
        pattern: str | re.Pattern[str],
        steps: list[Any],
        *,
        times: int | None = None,
    ) -> Rule:
        """Play one tool loop: a user message matching ``pattern`` gets ``steps`` in order.

        Each step answers one model call of the loop, chosen by how many function responses the
        caller has sent since that user message (:attr:`FakeRequest.tool_rounds`), so the script
        is stateless and safe under concurrency. A step is a function call
        ``{"name": ..., "args": {...}}``, a list of them (parallel calls), a str (the final
        text), a :class:`Reply`, or a callable ``f(request) -> Reply | dict | list | str``
        (to answer from the function responses it got). Past the last step the request falls
        through to later rules. ``pattern`` is searched in :attr:`FakeRequest.last_user_text`::

            fake.add_tool_script(r"Berlin", [
                {"name": "search_venues", "args": {"city": "Berlin", "capacity": 10}},
                lambda req: f"I found {len(req.function_responses[0]['response']['result'])} venues.",
            ])
        """
        compiled = _compile(pattern)
        script = list(steps)

        def play(request: FakeRequest) -> ReplyLike:
            if not compiled.search(request.last_user_text):
                return None
            index = request.tool_rounds
            if index >= len(script):
                return None
            step = script[index]
            if callable(step):
                step = step(request)
            if isinstance(step, Reply) or step is None:
                return step
            if isinstance(step, str):
                return Reply(text=step)
            if isinstance(step, (dict, list)):
                return Reply(function_call=step)
            raise TypeError(f"tool script steps are dicts, lists, str, Reply or callables, not {type(step).__name__}")

        return self.add_rule(r"", callback=play, times=times)

    def add_fault(
        self,
        kind: int | str,
        times: int | None = 1,
        pattern: str | re.Pattern[str] | None = None,
        *,
        delay_s: float | None = None,
    ) -> Fault:
        """Make the next ``times`` matching requests fail (``times=None``: every one).

        ``kind`` is an HTTP status (429, 500, 503, ... answered with a Gemini error body), or:
        ``"timeout"`` (sleep ``delay_s`` or ``timeout_fault_s``, at most 30 s, then answer
        normally, which a client with a shorter timeout never sees), ``"malformed_json"`` (200
        whose candidate text is not JSON), ``"wrong_schema"`` (200 with valid JSON of the wrong
        shape), ``"empty"`` (200 with empty candidate text) or ``"blocked"`` (200 without a
        candidate, the prompt blocked for safety: ``promptFeedback.blockReason``). ``pattern`` limits the fault to
        requests whose text matches.
        """
        if isinstance(kind, str) and kind not in FAULT_KINDS:
            if kind.isdigit():
                kind = int(kind)
            else:
                raise ValueError(f"unknown fault kind {kind!r}: use an HTTP status or one of {FAULT_KINDS}")
        if isinstance(kind, int) and not 400 <= kind <= 599:
            raise ValueError(f"fault status must be 4xx or 5xx, got {kind}")
        fault = Fault(kind, times=times, pattern=_compile(pattern) if pattern is not None else None, delay_s=delay_s)
        with self._lock:
            self._faults.append(fault)
        return fault

    def reset(self) -> None:
        """Forget rules, faults, recorded requests and counters (the server keeps running)."""
        with self._lock:
            self._rules.clear()
            self._faults.clear()
            self._requests.clear()
            self._errors.clear()
            self._max_in_flight = self._in_flight

    # -- inspection ----------------------------------------------------------------------

    @property
    def requests(self) -> list[FakeRequest]:
        """A snapshot of every request received, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def in_flight(self) -> int:
        """Requests being answered right now."""
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The most requests that were ever being answered at the same time."""
        with self._lock:
            return self._max_in_flight

    @property
    def errors(self) -> list[str]:
        """Problems inside the fake (a callback raised, an unknown path): check them in tests."""
        with self._lock:
            return list(self._errors)

    # -- serving (called from handler threads) -------------------------------------------

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _record(self, request: FakeRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _note_error(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)

    def _pick_fault(self, request: FakeRequest) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(request):
                    fault.hits += 1
                    return fault
        return None

    def _pick_reply(self, request: FakeRequest) -> Reply:
        with self._lock:
            rules = list(self._rules)
        for rule in rules:
            with self._lock:
                if not rule.matches(request):
                    continue
                if rule.reply is not None:
                    rule.hits += 1
                    return rule.reply
            reply = _as_reply(rule.callback(request)) if rule.callback else None
            if reply is not None:
                with self._lock:
                    rule.hits += 1
                return reply
        if self.handler is not None:
            reply = _as_reply(self.handler(request))
            if reply is not None:
                return reply
        if request.wants_json and self.default_json is not _MISSING:
            return Reply(json=self.default_json)
        return Reply(text=self.default_text)

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless stopping; True when the sleep was interrupted."""
        return seconds > 0 and self._stopping.wait(min(seconds, MAX_FAULT_SLEEP_S))


def _compile(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    return pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, re.DOTALL)


def _as_reply(value: ReplyLike) -> Reply | None:
    if value is None or isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(text=value)
    if isinstance(value, (dict, list)):
        return Reply(json=value)
    raise TypeError(f"FakeGemini callbacks return Reply, str, dict, list or None, not {type(value).__name__}")


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


def _response(parts: list[dict[str, Any]], *, finish: str | None, usage: dict[str, int], model: str, rid: str) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": rid}


def _error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": _STATUS_NAMES.get(status, "UNKNOWN")}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], fake: FakeGemini) -> None:
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, each reply waited ~40 ms for
    # the client's delayed ACK, which distorted every latency the fake is meant to control.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Silence per-request logging."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._send_json(404, _error_body(404, f"FakeGemini only answers POST, not GET {self.path}"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
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
        try:
            self._answer(fake, request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout fault, usually)
        finally:
            fake._leave()

    def _answer(self, fake: FakeGemini, request: FakeRequest) -> None:
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
            except Exception as exc:  # noqa: BLE001 - report to the client and the test
                fake._note_error(f"callback raised {type(exc).__name__}: {exc}")
                self._send_json(500, _error_body(500, f"FakeGemini callback raised {type(exc).__name__}: {exc}"))
                return
        text = reply.candidate_text()
        calls = reply.function_calls()
        answer_tokens = count_tokens(text) + sum(count_tokens(_json.dumps(c)) for c in calls)
        usage = _usage(prompt_tokens, answer_tokens)
        rid = uuid.uuid4().hex[:16]
        call_parts = [{"functionCall": call} for call in calls]
        if not request.stream:
            parts = ([{"text": text}] if text or not calls else []) + call_parts
            self._send_json(200, _response(parts, finish=reply.finish_reason, usage=usage, model=model, rid=rid))
            return
        pieces = _split(text, fake.stream_chunks) if text else ([] if calls else [""])
        events = [[{"text": piece}] for piece in pieces] + ([call_parts] if call_parts else [])
        chunks = [
            _response(parts, finish=reply.finish_reason if i == len(events) - 1 else None, usage=usage, model=model, rid=rid)
            for i, parts in enumerate(events)
        ]
        self._send_sse(chunks)

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = _json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
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
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _split(text: str, pieces: int) -> list[str]:
    """Split text into at most ``pieces`` consecutive chunks that join back to it exactly."""
    words = re.findall(r"\S+\s*|\s+", text)
    pieces = max(1, min(pieces, len(words)))
    size = -(-len(words) // pieces)
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]
