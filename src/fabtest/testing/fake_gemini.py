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
2. **Rules** (:meth:`FakeGemini.add_rule`, :meth:`FakeGemini.add_tool_script`) in the order added: the
   first whose regex is found in the request text (system instruction + every content part, joined by
   newlines) and that has uses left answers with text, JSON, a function call, or whatever its callback returns.
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
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabtest.testing.gemini_wire import MISSING as _MISSING
from fabtest.testing.gemini_wire import FakeRequest, Handler, Reply, Server, count_tokens

__all__ = ["FakeGemini", "FakeRequest", "Fault", "Reply", "Rule", "count_tokens"]

#: The longest a ``"timeout"`` fault ever sleeps, so a forgotten fault cannot hang a test run.
MAX_FAULT_SLEEP_S = 30.0
FAULT_KINDS = ("timeout", "malformed_json", "wrong_schema", "empty", "blocked")
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
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> FakeGemini:
        """Bind a free port on 127.0.0.1 and serve in a background thread. Returns self."""
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = Server(("127.0.0.1", 0), Handler, self)
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
