"""Issue 10's "done when": a suite where every other scenario is a different misbehaving agent.

Every good scenario passes, every bad one fails alone with a clear failure type naming what went
wrong, the results file holds every scenario, and no process is left behind, both sequentially
and with ``-n 2``. The run is a real ``python -m pytest`` subprocess so "after pytest exits" means
what it says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.child import child_env

FAKE_CLI = str(Path(__file__).parents[1] / "fixtures" / "fake_cli.py")

BOTS = '''
import os
import sys
from contextlib import contextmanager

from fabtest import AgentResponse
from fabtest.agents.cli_agent import CliAgent
from fabtest.conversation import ToolCall


def good(context):
    return lambda messages: AgentResponse(
        "hello, happy to help", [ToolCall("search", {"city": "Berlin"}, result=[1], metadata={"latency_ms": 3})],
        metadata={"model": "bot-1", "request_id": "req-42"})


def reporter(context):
    def chat(messages, on_tool_call=None):
        on_tool_call({"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"city": "Rome"}'}})
        return AgentResponse("hello from the callback", [ToolCall("search", {"city": "Rome"}, metadata={"id": "c1"})])
    return chat


def not_a_list(context):
    return lambda messages: AgentResponse(text="ok", tool_calls="notalist")


def int_name(context):
    return lambda messages: AgentResponse("ok", [ToolCall(5, {})])


def bad_call_metadata(context):
    return lambda messages: AgentResponse("ok", [ToolCall("search", {}, metadata="fast")])


def raiser(context):
    def chat(messages):
        raise ValueError("boom in misbots")
    return chat


class MetaRaiser:
    def chat(self, messages):
        return "hello"

    def metadata(self):
        raise KeyError("no model configured")


class AroundRaiser:
    def chat(self, messages):
        return "hello"

    @contextmanager
    def around(self):
        raise RuntimeError("db connection refused")
        yield


def echo(context):
    return lambda messages: "echo: " + messages[-1].content


def booker(context):
    return lambda messages: AgentResponse("booked!", [ToolCall("book_venue", {"venue": "x"})])


def hanging_cli(context):
    return CliAgent([sys.executable, FAKE_CLI_PATH, "--prompt={prompt}"], timeout_s=120,
                    env={"FAKE_CLI_MODE": "hang", "FAKE_CLI_PID_FILE": os.environ["PID_FILE"]})
'''

FEATURE = '''
Feature: Misbehaving agents
  Scenario: Good 1
    Given the agent "good"
    When the user says "hi"
    Then the response must match "hello"
    And the agent must call "search"

  Scenario: Tool calls not a list
    Given the agent "not_a_list"
    When the user says "hi"

  Scenario: Good 2 reports through the callback
    Given the agent "reporter"
    When the user says "hi"
    Then the agent must call "search" with:
      | argument | value |
      | city     | Rome  |

  Scenario: Tool call name is an int
    Given the agent "int_name"
    When the user says "hi"

  Scenario: Good 3 over HTTP with OpenAI tool calls
    Given the agent "http_good"
    When the user says "hi"
    Then the agent must call "search"

  Scenario: Tool call with bad metadata
    Given the agent "bad_call_metadata"
    When the user says "hi"

  Scenario: Good 4
    Given the agent "good"
    When the user says "hi"
    Then the response must match "hello"

  Scenario: Chat raises
    Given the agent "raiser"
    When the user says "hi"

  Scenario: Good 5
    Given the agent "good"
    When the user says "hi"

  Scenario: Metadata raises
    Given the agent "meta_raiser"
    When the user says "hi"

  Scenario: Good 6
    Given the agent "good"
    When the user says "hi"

  Scenario: Around raises
    Given the agent "around_raiser"
    When the user says "hi"

  Scenario: Good 7
    Given the agent "good"
    When the user says "hi"

  Scenario: HTTP answers garbage
    Given the agent "http_garbage"
    When the user says "hi"

  Scenario: Good 8
    Given the agent "good"
    When the user says "hi"

  Scenario: HTTP tool call arguments are not JSON
    Given the agent "http_badcalls"
    When the user says "hi"

  Scenario: Good 9
    Given the agent "good"
    When the user says "hi"

  Scenario: Catastrophic pattern
    Given the agent "echo"
    When the user says "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"
    Then the response must match "(a|aa)+$"

  Scenario: Good 10
    Given the agent "good"
    When the user says "hi"

  Scenario: The issue's pattern gets a verdict
    Given the agent "echo"
    When the user says "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"
    Then the response must match "^(e|c|h|o|:| |a+)+$"

  Scenario: Good 11
    Given the agent "good"
    When the user says "hi"

  Scenario: Off-graph jump
    Given the agent "booker"
    Given the topics:
      | topic     | characteristic | triggers        | next      |
      | greeting  | greets         |                 | gathering |
      | gathering | asks           | agent:/how many/ | booking   |
      | booking   | books          | tool:book_venue |           |
    When the user says "book it"
    Then the conversation must follow the topics "greeting, booking"

  Scenario: Good 12
    Given the agent "good"
    When the user says "hi"

  Scenario: Hanging CLI with a child
    Given the agent "hanging_cli"
    When the user says "hi"

  Scenario: Good 13
    Given the agent "good"
    When the user says "hi"
'''

BAD = {
    "Tool calls not a list": ("error", "tool_calls: expected a list of tool calls, got str ('notalist')"),
    "Tool call name is an int": ("error", "tool_calls[0].name"),
    "Tool call with bad metadata": ("error", "tool_calls[0].metadata"),
    "Chat raises": ("error", "the agent raised ValueError: boom in misbots"),
    "Metadata raises": ("error", "metadata() raised KeyError"),
    "Around raises": ("error", "around() failed on entry: RuntimeError: db connection refused"),
    "HTTP answers garbage": ("error", "answered non-JSON"),
    "HTTP tool call arguments are not JSON": ("error", "tool_calls[0].function.arguments: not valid JSON"),
    "Catastrophic pattern": ("error", "the pattern /(a|aa)+$/ took longer than"),
    "The issue's pattern gets a verdict": ("assertion", "no match for /^(e|c|h|o|:| |a+)+$/"),
    "Off-graph jump": ("assertion", "off-graph transition(s)"),
    "Hanging CLI with a child": ("timeout", ""),
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        bodies = {
            "/good": json.dumps({"text": "found it", "metadata": {"model": "http-model", "request_id": "req-7"},
                                 "tool_calls": [{"id": "c1", "type": "function",
                                                 "function": {"name": "search", "arguments": '{"city": "Oslo"}'}}]}),
            "/garbage": "<html>502 bad gateway</html>",
            "/badcalls": json.dumps({"text": "ok", "tool_calls": [{"function": {"name": "x", "arguments": "{oops"}}]}),
        }
        body = bodies.get(self.path, "{}").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _project(root: Path, url: str) -> None:
    (root / "misbots.py").write_text(BOTS.replace("FAKE_CLI_PATH", repr(FAKE_CLI)), encoding="utf-8")
    (root / "features").mkdir()
    (root / "features" / "misbehaving.feature").write_text(textwrap.dedent(FEATURE), encoding="utf-8")
    (root / "pyproject.toml").write_text(textwrap.dedent(f'''
        [tool.pytest.ini_options]
        pythonpath = ["."]

        [tool.fabtest]
        results_dir = "results"

        [tool.fabtest.agents]
        good = "misbots:good"
        reporter = "misbots:reporter"
        not_a_list = "misbots:not_a_list"
        int_name = "misbots:int_name"
        bad_call_metadata = "misbots:bad_call_metadata"
        raiser = "misbots:raiser"
        meta_raiser = "misbots:MetaRaiser"
        around_raiser = "misbots:AroundRaiser"
        echo = "misbots:echo"
        booker = "misbots:booker"
        hanging_cli = "misbots:hanging_cli"
        http_good = {{ http = "{url}/good" }}
        http_garbage = {{ http = "{url}/garbage" }}
        http_badcalls = {{ http = "{url}/badcalls" }}
    '''), encoding="utf-8")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for init to reap it is gone for our purpose
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def _run(tmp_path: Path, url: str, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], list[int]]:
    _project(tmp_path, url)
    pid_file = tmp_path / "cli.pids"
    env = child_env("FABTEST_", "GEMINI_", "GOOGLE_")
    env["PID_FILE"] = str(pid_file)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "features", "--fabtest-experiment-id", "exp_misbehaving", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    results = tmp_path / "results" / "exp_misbehaving.json"
    assert results.is_file(), proc.stdout + proc.stderr
    pids = [int(p) for p in pid_file.read_text().split()] if pid_file.exists() else []
    return proc, json.loads(results.read_text(encoding="utf-8")), pids


def _assert_suite(proc: subprocess.CompletedProcess[str], doc: dict[str, Any], pids: list[int]) -> None:
    output = proc.stdout + proc.stderr
    assert "INTERNALERROR" not in output and "crashed" not in output, output
    assert proc.returncode == 1, output
    by_name = {s["name"]: s for s in doc["scenario_results"]}
    assert len(by_name) == FEATURE.count("Scenario:"), sorted(by_name)
    for name, scenario in by_name.items():
        if name in BAD:
            kind, text = BAD[name]
            assert (scenario["passed"], scenario["failure_type"]) == (False, kind), (name, scenario["failure_message"])
            assert text in scenario["failure_message"], (name, scenario["failure_message"])
        else:
            assert scenario["passed"], (name, scenario["failure_message"])
    assert len(pids) == 2, "the fake CLI wrote its own and its child's pid"
    deadline = time.monotonic() + 10  # bounded wait for init to reap the orphaned child
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if _alive(pid)], "CLI agent processes outlived pytest"
    # what the good agents said about themselves reached the results
    good = by_name["Good 1"]["transcript"][0]
    assert good["metadata"] == {"model": "bot-1", "request_id": "req-42"}
    assert good["tool_calls"][0]["metadata"] == {"latency_ms": 3}
    http = by_name["Good 3 over HTTP with OpenAI tool calls"]["transcript"][0]
    assert http["metadata"] == {"model": "http-model", "request_id": "req-7"}
    assert http["tool_calls"][0]["arguments"] == {"city": "Oslo"}
    assert len(by_name["Good 2 reports through the callback"]["transcript"][0]["tool_calls"]) == 1
    off = by_name["Off-graph jump"]
    assert off["off_graph_transitions"] == ["greeting -> booking (turn 1)"] and off["topic_path"] == ["booking"]
    assert off["transcript"][0]["off_graph"] is True


def test_sequential_with_agent_timeout(tmp_path: Path, http_url: str) -> None:
    proc, doc, pids = _run(tmp_path, http_url, "--fabtest-agent-timeout", "2", "--tb=long")
    _assert_suite(proc, doc, pids)
    assert "did not answer within 2s" in {s["name"]: s for s in doc["scenario_results"]}[
        "Hanging CLI with a child"]["failure_message"]
    # --tb=long shows the failing line in the user's agent
    assert 'raise ValueError("boom in misbots")' in proc.stdout and "misbots.py" in proc.stdout


def test_two_workers_with_scenario_timeout(tmp_path: Path, http_url: str) -> None:
    pytest.importorskip("xdist")
    proc, doc, pids = _run(tmp_path, http_url, "-n", "2", "--fabtest-scenario-timeout", "5")
    _assert_suite(proc, doc, pids)
    assert "--fabtest-scenario-timeout" in {s["name"]: s for s in doc["scenario_results"]}[
        "Hanging CLI with a child"]["failure_message"]
    assert 'raise ValueError("boom in misbots")' not in proc.stdout  # the default --tb keeps it to one line
