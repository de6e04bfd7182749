"""A black-box HTTP agent's tool calls, read from the OpenTelemetry spans it exports to fabtest.

The agent is an HTTP server in this process that never reports a tool call in its answer: it
exports GenAI ``execute_tool`` spans under the ``traceparent`` fabtest sent, with the real
OpenTelemetry SDK (OTLP/HTTP protobuf) or as plain OTLP/JSON posts, to fabtest's receiver on
127.0.0.1. The tool steps see those calls; a turn whose spans never arrive makes them inconclusive.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed: pip install -e '.[otel]'")
# Loaded at collection, before any in-process pytester run: such a run drops the modules first
# imported during it, and an exporter imported again afterwards kept the dropped run's SpanKind
# (KeyError: <SpanKind.INTERNAL: 0> when the agent exported, under -n 2 in some orders).
pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
import opentelemetry.sdk.trace.export  # noqa: E402,F401
import opentelemetry.trace.propagation.tracecontext  # noqa: E402,F401


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tools_for(said: str) -> list[tuple[str, dict[str, Any], Any]]:
    """The tools the agent "runs" for a message (it tells no one but its traces)."""
    if "silent" in said:
        return []
    calls = [("lookup_account", {"phone": "0176 555 0101"}, {"account_id": "A-17", "plan": "basic"})]
    if "unlimited" in said:
        calls.append(("change_plan", {"account": "A-17", "plan": "unlimited"}, "ok"))
    return calls


class _Agent(BaseHTTPRequestHandler):
    receiver_port = 0

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        said = body["messages"][-1]["content"].lower()
        if "silent" not in said:  # exports nothing at all: the turn's traces never arrive
            (self._export_json if self.path == "/chat-json" else self._export_sdk)(said)
        reply = json.dumps({"text": "Done." if "unlimited" in said else "You are on basic."}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def _export_sdk(self, said: str) -> None:
        """The real SDK: a server span under fabtest's traceparent, a GenAI tool span per call."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{self.receiver_port}/v1/traces", timeout=5)))
        tracer = provider.get_tracer("support-agent")
        parent = TraceContextTextMapPropagator().extract({"traceparent": self.headers["traceparent"]})
        with tracer.start_as_current_span("POST /chat", context=parent):
            for name, arguments, result in _tools_for(said):
                with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                        "gen_ai.tool.call.arguments": json.dumps(arguments),
                        "gen_ai.tool.call.result": json.dumps(result)}):
                    pass
        provider.shutdown()

    def _export_json(self, said: str) -> None:
        """Plain OTLP/JSON posts: the server span in one request, the tool spans in another."""
        _, trace_id, parent_id, _ = self.headers["traceparent"].split("-")
        root = "aa" * 8
        tools = [{"traceId": trace_id, "spanId": f"{i + 1:016x}", "parentSpanId": root, "name": f"execute_tool {name}",
                  "startTimeUnixNano": str(1000 + i),
                  "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                                 {"key": "gen_ai.tool.name", "value": {"stringValue": name}},
                                 {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": json.dumps(arguments)}}]}
                 for i, (name, arguments, _result) in enumerate(_tools_for(said))]
        server = [{"traceId": trace_id, "spanId": root, "parentSpanId": parent_id, "name": "POST /chat"}]
        for spans in (tools, server):  # the children first, as an exporter sends them
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.receiver_port}/v1/traces", method="POST",
                data=json.dumps({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "agent"}, "spans": spans}]}]}).encode(),
                headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=5) as answer:
                assert answer.status == 200

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return


@pytest.fixture
def agent_server() -> Iterator[tuple[str, int]]:
    """(the agent's base URL, the port fabtest's receiver is told to use)."""
    _Agent.receiver_port = _free_port()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Agent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Agent.receiver_port
    finally:
        server.shutdown()
        server.server_close()


FEATURE = '''
Feature: A black-box agent's tools
  Scenario: The tools come from the traces
    When the user says "What plan am I on? 0176 555 0101"
    Then the agent must call "lookup_account" with:
      | argument | value         |
      | phone    | 0176 555 0101 |
    And the agent must not call "change_plan"
    When the user says "Switch me to unlimited"
    Then the agent must call "lookup_account" before "change_plan"
    And the conversation must call "change_plan" at most 1 time

  Scenario: A call seen only in the traces fails a must not
    When the user says "Switch me to unlimited"
    Then the agent must not call "change_plan"

  Scenario: No traces arrive
    When the user says "silent please"
    Then the agent should call "lookup_account"
    And the agent must not call "change_plan"
'''


@pytest.mark.parametrize(("path", "otel"), [("/chat", False), ("/chat-json", False), ("/chat", True)],
                         ids=["sdk-protobuf", "otlp-json", "under-fabtests-own-trace"])
def test_tool_steps_read_the_calls_in_the_agents_traces(project, agent_server, monkeypatch, path: str,
                                                        otel: bool) -> None:
    """With ``otel`` fabtest's traceparent is its agent-call span (the agent joins fabtest's trace, one
    per scenario), and fabtest's own spans reach the same receiver: only the agent's spans under
    the turn's agent call count."""
    url, port = agent_server
    project.pyproject(f'agent = {{ http = "{url}{path}", traces = true }}\notel = {str(otel).lower()}',
                      extra=f"[tool.fabtest.traces]\nport = {port}\nwait = 1\n")
    project.feature("features/t.feature", FEATURE)
    if otel:  # a tracer provider is set once per process: a run of its own
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
        result = project.run_subprocess("features", "--fabtest-no-preflight")
    else:
        result = project.run("features", "--fabtest-no-preflight")
    result.assert_outcomes(passed=1, failed=2)
    by_name = project.scenarios()

    first = by_name["The tools come from the traces"]
    calls = [c for t in first["transcript"] for c in t["tool_calls"]]
    assert [(c["name"], c["arguments"], c["metadata"]["source"]) for c in calls] == [
        ("lookup_account", {"phone": "0176 555 0101"}, "traces"),
        ("lookup_account", {"phone": "0176 555 0101"}, "traces"),
        ("change_plan", {"account": "A-17", "plan": "unlimited"}, "traces")]
    if path == "/chat":  # the SDK path sets the results too
        assert calls[0]["result"] == {"account_id": "A-17", "plan": "basic"}
    assert first["transcript"][1]["metadata"]["fabtest.traces"]["tool_calls"] == 2
    traces = {t["metadata"]["fabtest.traces"]["trace_id"] for t in first["transcript"]}
    assert len(traces) == (1 if otel else 2)  # fabtest's scenario trace, or a fresh trace per turn

    refused = by_name["A call seen only in the traces fails a must not"]["failure_message"]
    assert "not_call_tool 'not_call_tool:change_plan' (must) failed" in refused, refused

    silent = by_name["No traces arrive"]
    checks = {c["criterion"]: c for c in silent["evaluations"]["details"] + silent["expectations"]["details"]}
    assert checks["call_tool:lookup_account"]["status"] == "inconclusive"
    assert checks["not_call_tool:change_plan"]["status"] == "inconclusive"  # never passed on no evidence
    assert "did not arrive" in checks["call_tool:lookup_account"]["details"]
    assert "was inconclusive" in silent["failure_message"]


CLI_AGENT = '''
"""A CLI agent run once per turn: it exports its spans under the TRACEPARENT fabtest gives its process."""
import json, os, sys, urllib.request

said = sys.argv[1].removeprefix("--prompt=").lower()
_, trace_id, parent_id, _ = os.environ["TRACEPARENT"].split("-")
root = "bb" * 8
spans = [{"traceId": trace_id, "spanId": "00000000000000c1", "parentSpanId": root,
          "name": "execute_tool lookup_account",
          "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                         {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup_account"}}]},
         {"traceId": trace_id, "spanId": root, "parentSpanId": parent_id, "name": "cli turn"}]
request = urllib.request.Request(
    f"http://127.0.0.1:{os.environ['RECEIVER_PORT']}/v1/traces", method="POST",
    data=json.dumps({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "cli"}, "spans": spans}]}]}).encode(),
    headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).close()
print("You are on basic.")
'''


def test_a_cli_agents_tool_calls_come_from_the_spans_it_exports_under_its_traceparent(project) -> None:
    """A CLI agent with ``traces = true`` gets the turn's trace context as ``TRACEPARENT`` in its
    environment (OpenTelemetry's environment-variable carrier) and its spans become tool calls."""
    import sys

    port = _free_port()
    project.write("cli_agent.py", CLI_AGENT)
    project.agent(f'''
        from fabtest.agents.cli_agent import CliAgent

        def build(context):
            return CliAgent([{sys.executable!r}, "cli_agent.py", "--prompt={{prompt}}"], output_format="text",
                            env={{"RECEIVER_PORT": "{port}"}}, traces=context.get("traces", False))
    ''')
    project.pyproject('agent = { factory = "mybot:build", traces = true }',
                      extra=f"[tool.fabtest.traces]\nport = {port}\nwait = 5\n")
    project.feature("features/t.feature", '''
        Feature: A CLI agent's tools
          Scenario: Seen in its traces
            When the user says "What plan am I on?"
            Then the agent must call "lookup_account"
    ''')
    project.run("features", "--fabtest-no-preflight").assert_outcomes(passed=1)
    turn = project.scenarios()["Seen in its traces"]["transcript"][0]
    assert [(c["name"], c["metadata"]["source"]) for c in turn["tool_calls"]] == [("lookup_account", "traces")]
    assert turn["metadata"]["fabtest.traces"]["tool_calls"] == 1
