"""HTTP and OpenAI agents declare their tools, port values are not masked (secrets
still are), and a scenario's usage names the judge's model.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fabtest._internal import redaction

ARGS = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:benchmark")
FEATURE = '''Feature: Remote tools
  Scenario: A typo in a tool name
    Given the agent "{agent}"
    When the user says "hi"
    Then the agent must not call "serch_flights"

  Scenario: A declared tool
    Given the agent "{agent}"
    When the user says "hi"
    Then the agent must not call "search_flights"
    And the response should satisfy "The agent is polite"
'''


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body: dict[str, Any] = ({"choices": [{"message": {"role": "assistant", "content": "hello"}}]}
                                if self.path.endswith("/chat/completions") else {"text": "hello"})
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()



@pytest.mark.parametrize("kind", ["http", "openai"])
def test_remote_agents_declare_tools_and_steps_are_checked_against_them(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, port: int, kind: str) -> None:
    monkeypatch.setenv("AGENT_PORT", str(port))
    url = "http://127.0.0.1:${AGENT_PORT}/" + ("v1" if kind == "openai" else "chat")
    table = f'{kind} = "{url}", tools = ["search_flights", "rebook"]' + (', model = "m"' if kind == "openai" else "")
    pytester.makefile(".toml", pyproject=f'[tool.fabtest]\noffline_llm = "fake.yaml"\n\n[tool.fabtest.agents]\n'
                                         f'remote = {{ {table} }}\n')
    (pytester.path / "fake.yaml").write_text("verdicts:\n  default: passed\n", encoding="utf-8")
    (pytester.path / "features").mkdir()
    (pytester.path / "features" / "remote.feature").write_text(FEATURE.format(agent="remote"), encoding="utf-8")
    result = pytester.runpytest(*ARGS, "features", "--fabtest-experiment-id", "remote")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert 'unknown tool "serch_flights"' in out and 'did you mean "search_flights"?' in out

    document = json.loads((pytester.path / "results" / "remote.json").read_text())
    declared = next(r for r in document["scenario_results"] if r["name"] == "A declared tool")
    assert declared["usage"]["judge"]["model"] == "scripted"  # the scenario says which model judged it
    assert f"127.0.0.1:{port}/" in json.dumps(declared["agent_metadata"])  # a port is not a secret: not masked


def test_port_values_are_not_masked_but_secrets_are(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_PORT", "8123")
    monkeypatch.setenv("BOT_TOKEN", "tok-abcdef")
    monkeypatch.setenv("BOT_PIN", "4321")
    redaction.clear()
    try:
        redaction.register_configured_secrets({"http": "http://127.0.0.1:${AGENT_PORT}/chat?t=${BOT_TOKEN}&p=${BOT_PIN}"})
        shown = redaction.redact("http://127.0.0.1:8123/chat?t=tok-abcdef&p=4321")
    finally:
        redaction.clear()
    assert shown == "http://127.0.0.1:8123/chat?t=***&p=***"


def test_an_agent_written_for_chat_dicts_reads_fabtest_messages() -> None:
    """A stranger's first agent did ``messages[-1]["content"]`` and every scenario errored with
    "'Message' object is not subscriptable"."""
    from fabtest import Message

    message = Message("user", "Rebook my flight")
    assert (message["role"], message["content"], message.get("content"), message.get("name", "-")) == (
        "user", "Rebook my flight", "Rebook my flight", "-")
    with pytest.raises(KeyError, match="'role' .* and 'content'"):
        message["text"]
