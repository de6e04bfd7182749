"""An HTTP agent's ``metadata.usage`` and ``metadata.model`` become the agent role's tokens and cost."""

from __future__ import annotations

import json
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class _Agent(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        model = self.path.strip("/")
        body = json.dumps({"text": "Hello there", "metadata": {
            "model": model, "usage": {"input_tokens": 1000, "output_tokens": 100}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def agent_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


FEATURE = """
Feature: Greeting
  Scenario: Says hello
    When the user says "Hi"
    Then the response must match "Hello"
    When the user says "Hi again"
"""


def _run(pytester: pytest.Pytester, url: str, exp_id: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makefile(".toml", pyproject=f'[tool.fabtest]\nagent = {{ http = "{url}" }}\n')
    pytester.makefile(".feature", greeting=textwrap.dedent(FEATURE))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--fabtest-experiment-id", exp_id,
                                "--fabtest-no-preflight")
    result.assert_outcomes(passed=1)
    return result, json.loads((pytester.path / "results" / f"{exp_id}.json").read_text())


def test_http_metadata_usage_is_the_agent_cost(pytester: pytest.Pytester, agent_url: str) -> None:
    result, doc = _run(pytester, agent_url + "/gemini-2.0-flash", "exp_http01")
    [scenario] = doc["scenario_results"]
    assert scenario["usage"]["agent"] == {"calls": 2, "input_tokens": 2000, "output_tokens": 200,
                                          "model": "gemini-2.0-flash"}
    assert scenario["cost"] == {"usd": pytest.approx((2000 * 0.10 + 200 * 0.40) / 1e6), "complete": True,
                                "roles": {"agent": {"model": "gemini-2.0-flash", "usd": pytest.approx(0.00028)}}}
    result.stdout.fnmatch_lines(["*agent*gemini-2.0-flash*2*2,000*200*$0.000280*", "*Total cost: $0.000280*"])


def test_an_unknown_agent_model_shows_tokens_and_a_note_on_how_to_price_it(pytester: pytest.Pytester,
                                                                           agent_url: str) -> None:
    result, doc = _run(pytester, agent_url + "/acme-bot-v1", "exp_http02")
    assert doc["summary"]["cost"]["unpriced"] == [{"role": "agent", "model": "acme-bot-v1", "input_tokens": 2000,
                                                   "output_tokens": 200}]
    assert doc["summary"]["cost"]["complete"] is False
    result.stdout.fnmatch_lines(["*agent*acme-bot-v1*2,000*200*n/a*", "  Total cost: n/a (no price for any tokens)"])
    out = result.stdout.str()
    assert out.count("cost n/a for model 'acme-bot-v1'") == 1  # one note, not one per turn or scenario
    assert '[tool.fabtest.prices] "acme-bot-v1" = { input = ' in out
