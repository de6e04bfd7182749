"""One bad character never takes the run down (issue 22, reliability round 2, item 3): a lone
surrogate in an agent's reply, tool-call arguments, metadata or an HTTP agent's JSON becomes U+FFFD
at the agent boundary (sequential and under ``-n 2``), and an agent that closes ``sys.stdout``
costs nothing."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.bad_inputs import BASE_ARGS

from fabtest.agents.boundary import coerce_response, without_surrogates

SURROGATES = ["\ud83d", "\ude00", "\udc80", "\udfff", "\ud800", "x\ud83dy", "\ud83d\ude00"]


@pytest.mark.parametrize("bad", SURROGATES)
@pytest.mark.parametrize("where", ["text", "tool_name", "arguments", "argument_key", "arguments_json", "metadata",
                                   "result", "plain_str"])
def test_a_lone_surrogate_anywhere_in_a_reply_becomes_the_replacement_character(bad: str, where: str) -> None:
    reply: object = {
        "text": bad if where == "text" else "ok",
        "tool_calls": [{"name": bad if where == "tool_name" else "lookup",
                        "arguments": (json.dumps({"q": bad}) if where == "arguments_json" else
                                      {bad: 1} if where == "argument_key" else {"q": bad if where == "arguments" else 1}),
                        "result": bad if where == "result" else None}],
        "metadata": {"m": bad} if where == "metadata" else {},
    }
    if where == "plain_str":
        reply = bad
    response = coerce_response(reply)
    dumped = json.dumps(dataclasses.asdict(response), ensure_ascii=False)
    dumped.encode("utf-8")  # would raise UnicodeEncodeError for a lone surrogate
    assert "\ufffd" in dumped or "\U0001f600" in dumped  # a split pair that went through JSON is whole again


def test_text_without_surrogates_is_left_alone() -> None:
    value = {"k": ["emoji 😀", "plain"], "n": 3}
    assert without_surrogates(value) == value


AGENT = '''
import sys


def build(context):
    def chat(messages):
        said = messages[-1].content
        if said == "close":
            sys.stdout.close()
            sys.stderr.close()
            return "closed"
        if said == "tool":
            return {"text": "ok \\ud83d", "tool_calls": [{"name": "lookup", "arguments": {"q": "half \\ud83d"}}]}
        if said == "meta":
            return {"text": "ok", "metadata": {"m": "\\udc80"}}
        return "half an emoji \\ud83d here"
    return chat
'''

FEATURE = '''
Feature: Bad characters
  Scenario: Reply
    When the user says "reply"
    Then the response must match "nothing"
  Scenario: Tool
    When the user says "tool"
    Then the agent must call "nothing"
  Scenario: Meta
    When the user says "meta"
    Then the response must match "ok"
  Scenario: Close
    When the user says "close"
    Then the response must match "closed"
  Scenario: After the close
    When the user says "reply"
    Then the response must match "half an emoji"
'''

PYPROJECT = '''
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.fabtest]
results_dir = "results"
agent = "surro:build"
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_lone_surrogates_and_a_closed_stdout_cost_no_more_than_their_scenario(pytester: pytest.Pytester,
                                                                              workers: list[str]) -> None:
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makepyfile(surro=AGENT)
    pytester.makefile(".feature", bad=FEATURE)
    result = pytester.runpytest_subprocess(*BASE_ARGS, "-q", "--fabtest-experiment-id", "exp_chars",
                                           "--fabtest-no-preflight", *workers)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, output
    assert "INTERNALERROR" not in output and "I/O operation on closed file" not in output, output
    assert "2 failed, 3 passed" in output
    doc = json.loads((pytester.path / "results" / "exp_chars.json").read_text(encoding="utf-8"))
    by_name = {s["name"]: s for s in doc["scenario_results"]}
    assert by_name["Close"]["passed"] and by_name["After the close"]["passed"]
    assert by_name["Reply"]["failure_type"] == "assertion"
    assert "half an emoji \ufffd here" in json.dumps(by_name["Reply"], ensure_ascii=False)


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"text": "half \\ud83d an emoji", "tool_calls": [{"name": "look\\udc80", "arguments": "{\\"q\\": \\"\\\\ud83d\\"}"}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def surrogate_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/chat"
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_agent_answering_json_with_a_lone_surrogate_escape_is_one_scenario(pytester: pytest.Pytester,
                                                                                  surrogate_server: str) -> None:
    pytester.makefile(".toml", pyproject=f'[tool.fabtest]\nresults_dir = "results"\nagent = {{http = "{surrogate_server}"}}\n')
    pytester.makefile(".feature", http='Feature: H\n  Scenario: S\n    When the user says "hi"\n'
                                       '    Then the response must match "an emoji"\n    And the agent must call "look"\n')
    result = pytester.runpytest_subprocess(*BASE_ARGS, "-q", "--fabtest-experiment-id", "exp_http", "--fabtest-no-preflight")
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output, output
    assert result.ret == 1 and "1 failed" in output, output  # the call is named "look\ufffd", not "look"
    doc = json.loads((pytester.path / "results" / "exp_http.json").read_text(encoding="utf-8"))
    text = json.dumps(doc["scenario_results"][0], ensure_ascii=False)
    assert "half \ufffd an emoji" in text and "look\ufffd" in text


ESCAPES = ["\x1b[2J", "\x1b]0;pwned\x07", "\x1b[8mhidden", "\x9b31m", "bell\x07", "\x1b[31mred"]

ANSI_AGENT = '''
def build(context):
    def chat(messages):
        return "look " + context.get("escape", "\\x1b[2J") + " here"
    return chat


def raising(context):
    def chat(messages):
        raise RuntimeError("bad \\x1b[2J\\x1b]0;pwned\\x07 thing")
    return chat
'''


@pytest.mark.parametrize("escape", ESCAPES)
def test_control_characters_are_made_inert_for_the_terminal(escape: str) -> None:
    from fabtest._internal.terminal import inert

    shown = inert(f"a {escape} b\n\tc")
    assert not any(ch in shown for ch in "\x1b\x07\x9b") and shown.endswith(" b\n\tc")
    assert "\\x" in shown


@pytest.mark.parametrize("agent", ["build", "raising"])
def test_escape_sequences_from_an_agent_or_an_experiment_name_never_reach_the_terminal(
        pytester: pytest.Pytester, agent: str) -> None:
    pytester.makefile(".toml", pyproject=PYPROJECT.replace('"surro:build"', f'"ansi:{agent}"'))
    pytester.makepyfile(ansi=ANSI_AGENT)
    pytester.makefile(".feature", one='Feature: F\n  Scenario: S\n    When the user says "hi"\n'
                                      '    Then the response must match "nothing"\n')
    result = pytester.runpytest_subprocess(*BASE_ARGS, "-q", "-rA", "--fabtest-no-preflight",
                                           "--fabtest-experiment", "name \x1b[2J\x1b]0;x\x07")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, output
    assert "\x1b[2J" not in output and "\x07" not in output, output
    assert "\\x1b[2J" in output
