"""Fixtures for the LLM provider tests: FakeGemini, a tiny fake OpenAI server, a clean env."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fabtest.llm.base import LLMSettings
from fabtest.testing import FakeGemini

_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")



@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


@pytest.fixture
def settings(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> LLMSettings:
    """Gemini settings aimed at the fake, with a key in the environment."""
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    return LLMSettings(base_url=fake.base_url, timeout_s=5.0, max_retries=3)


@dataclass
class FakeOpenAI:
    """A minimal OpenAI-compatible /v1/chat/completions server on 127.0.0.1."""

    # int status, str content, or float: answer the default after that many seconds; popped in order
    replies: list[Any] = field(default_factory=list)
    default: str = "hello from openai"
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    base_url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(self, body: dict[str, Any], headers: dict[str, str]) -> Any:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            return self.replies.pop(0) if self.replies else self.default


def _openai_handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/chat/completions":
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            reply = server.next_reply(body, {k.lower(): v for k, v in self.headers.items()})
            if isinstance(reply, float):
                time.sleep(reply)
                reply = server.default
            if isinstance(reply, int):
                return self._send(reply, {"error": {"message": f"injected {reply}"}})
            self._send(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
                },
            )

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up on this request (a cut or a hedged attempt)

    return Handler


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    state = FakeOpenAI()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _openai_handler(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


