"""OpenTelemetry traces of a run: the span tree (SDK in-memory exporter), the OTLP export to a
receiver on 127.0.0.1 with an HTTP agent's ``traceparent``, and the one-line error without the extra.

The runs are subprocesses (``runpytest_subprocess``): a tracer provider is set once per process.
"""

from __future__ import annotations

import json
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed: pip install -e '.[otel]'")

PIZZA = '''
from opentelemetry import trace
from fabtest import AgentResponse, ToolCall

tracer = trace.get_tracer("pizza")


def build(context):
    def chat(messages, on_tool_call=None):
        with tracer.start_as_current_span("pizza.menu_lookup"):  # the agent's own span
            said = messages[-1].content.lower()
        if "pepperoni" in said:
            return AgentResponse(text="One large pepperoni.", metadata={"model": "pizza-1",
                                 "usage": {"input_tokens": 120, "output_tokens": 30}},
                                 tool_calls=[ToolCall("add_to_order", {"item": "pepperoni"}, {"ok": True},
                                                      metadata={"id": "call-7"})])
        if "that's all" in said:
            return AgentResponse(text="Order placed.", tool_calls=[ToolCall("place_order", {}, {"order": 42})])
        return AgentResponse(text="Hi! What would you like?")

    return chat
'''

FEATURE = """
Feature: Ordering pizza
  Background:
    Given the criterion "friendly" means "The agent is warm"

  Scenario: A simulated customer orders
    Given a simulated user with the goal "Order a large pepperoni"
    And the simulation stops when the agent calls "place_order"
    When the simulated user talks to the agent
    Then the conversation must include a call to "add_to_order"
    And the goal must be achieved
    And every response should satisfy "friendly"
"""

SCRIPT = """
simulated_user: ["hi", "a large pepperoni", "that's all"]
verdicts: {default: passed, friendly: failed}
goal_achieved: true
"""

#: an SDK provider set before fabtest starts (as an app that traces itself would), spans kept in
#: memory and written to spans.json when the process exits
CONFTEST = """
import atexit, json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)


def _dump():
    provider.force_flush()
    spans = [{"name": s.name, "id": s.context.span_id, "trace": s.context.trace_id,
              "parent": s.parent.span_id if s.parent else None, "status": s.status.status_code.name,
              "attributes": dict(s.attributes)} for s in exporter.get_finished_spans()]
    with open("spans.json", "w") as f:
        json.dump(spans, f, default=list)


atexit.register(_dump)
"""


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "FABTEST_AGENT", "FABTEST_RESULTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
                 "OTEL_SERVICE_NAME", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)


def _project(pytester: pytest.Pytester, pyproject: str, **files: str) -> None:
    pytester.makefile(".toml", pyproject=pyproject)
    for name, text in {"pizza.py": PIZZA, "order.feature": FEATURE, "fake.yaml": SCRIPT, **files}.items():
        (pytester.path / name).write_text(textwrap.dedent(text), encoding="utf-8")


def _children(spans: list[dict[str, Any]], parent: dict[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    return [s for s in spans if s["parent"] == parent["id"] and s["name"].startswith(prefix)]


def test_a_scenario_is_a_trace_of_turns_agent_calls_tools_and_llm_calls(pytester: pytest.Pytester) -> None:
    _project(pytester, '[tool.fabtest]\nagent = "pizza:build"\nresults_dir = "results"\n', **{"conftest.py": CONFTEST})
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--fabtest-otel", "--fabtest-fake-llm", "fake.yaml")
    result.assert_outcomes(passed=1)
    spans = json.loads((pytester.path / "spans.json").read_text())

    (scenario,) = [s for s in spans if s["name"].startswith("fabtest.scenario ")]
    assert scenario["name"] == "fabtest.scenario A simulated customer orders" and scenario["parent"] is None
    attrs = scenario["attributes"]
    assert attrs["fabtest.scenario.id"].startswith("example:") and attrs["fabtest.scenario.outcome"] == "passed"
    assert attrs["fabtest.verdicts.passed"] >= 2 and "fabtest.failure_type" not in attrs
    assert {s["trace"] for s in spans} == {scenario["trace"]}  # one trace: nothing lost its parent on a thread

    turns = _children(spans, scenario, "fabtest.turn ")
    assert sorted(t["attributes"]["fabtest.turn.number"] for t in turns) == [1, 2, 3]
    for turn in turns:
        (agent,) = _children(spans, turn, "invoke_agent ")
        assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        # the agent's own span, made on fabtest's worker thread, nests under the agent call
        assert [s["name"] for s in _children(spans, agent, "pizza.")] == ["pizza.menu_lookup"]
    second = next(t for t in turns if t["attributes"]["fabtest.turn.number"] == 2)
    (agent2,) = _children(spans, second, "invoke_agent ")
    assert agent2["attributes"]["gen_ai.usage.input_tokens"] == 120
    assert agent2["attributes"]["gen_ai.response.model"] == "pizza-1"
    (tool,) = _children(spans, agent2, "execute_tool ")
    assert tool["attributes"] == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add_to_order",
                                  "gen_ai.tool.call.id": "call-7"}

    chats = [s for s in spans if s["name"].startswith("chat ")]
    roles = {(s["attributes"]["fabtest.role"], s["attributes"]["fabtest.llm.purpose"]) for s in chats}
    assert ("simulator", "simulated_user") in roles and ("judge", "criteria") in roles and ("judge", "goal") in roles
    for chat in chats:
        assert chat["attributes"]["gen_ai.operation.name"] == "chat"
        assert chat["attributes"]["gen_ai.request.model"] == "scripted"
    # the judge's soft verdicts run on its executor: carried under the scenario, not orphaned
    friendly = [c for c in chats if "friendly" in c["attributes"].get("fabtest.criteria", [])]
    assert friendly and all(c["parent"] is not None for c in friendly)
    # no conversation text reaches a span (it may hold secrets)
    assert "pepperoni" not in json.dumps([s["attributes"] for s in spans])


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver and an HTTP agent on one loopback server."""

    exports: list[bytes] = []
    traceparents: list[str] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/v1/traces":
            type(self).exports.append(body)
            reply, kind = b"", "application/x-protobuf"
        else:  # the agent: POST {"messages": [...]}
            type(self).traceparents.append(self.headers.get("traceparent", ""))
            said = json.loads(body)["messages"][-1]["content"].lower()
            text = "Order placed." if "that's all" in said else "Sure."
            calls = [{"name": "place_order", "arguments": {}}] if "that's all" in said else []
            reply, kind = json.dumps({"text": text, "tool_calls": calls}).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return


@pytest.fixture
def receiver() -> Iterator[str]:
    _Receiver.exports, _Receiver.traceparents = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_spans_reach_an_otlp_receiver_and_an_http_agent_gets_the_turns_traceparent(
        pytester: pytest.Pytester, receiver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    feature = FEATURE.replace('    And every response should satisfy "friendly"\n', "").replace(
        'Then the conversation must include a call to "add_to_order"\n    And', "Then")
    _project(pytester, f'[tool.fabtest]\nagent = {{http = "{receiver}/chat"}}\notel = true\n', **{"order.feature": feature})
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "pizza-tests")
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--fabtest-fake-llm", "fake.yaml")
    result.assert_outcomes(passed=1)

    spans, services = [], set()
    for body in _Receiver.exports:
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            services |= {a.value.string_value for a in rs.resource.attributes if a.key == "service.name"}
            spans += [s for ss in rs.scope_spans for s in ss.spans]
    assert services == {"pizza-tests"}
    names = [s.name for s in spans]
    assert "fabtest.scenario A simulated customer orders" in names and names.count("invoke_agent HttpAgent") == 3
    agents = {s.span_id.hex(): s for s in spans if s.name == "invoke_agent HttpAgent"}
    # W3C traceparent: 00-<trace id>-<parent span id>-<flags>; the parent is fabtest's agent-call span
    assert len(_Receiver.traceparents) == 3
    for header in _Receiver.traceparents:
        _, trace_id, parent_id, _ = header.split("-")
        assert parent_id in agents and agents[parent_id].trace_id.hex() == trace_id


def test_otel_without_the_extra_is_a_one_line_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(pytester, '[tool.fabtest]\nagent = "pizza:build"\notel = true\n')
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import opentelemetry fails, as when not installed
    result = pytester.runpytest("-p", "no:randomly", "--fabtest-fake-llm", "fake.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in result.stderr.lines if "otel" in line]
    assert len(lines) == 1 and "pyproject.toml [tool.fabtest] otel" in lines[0] and "pip install 'pytest-fabtest[otel]'" in lines[0]


def test_a_failing_agent_call_is_an_error_span_without_its_secrets() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from fabtest import tracing
    from fabtest._internal import redaction
    from fabtest.agents.base import AgentError
    from fabtest.conversation import Message
    from fabtest.engine.turns import call_agent

    class Broken:
        def chat(self, messages: list[Message]) -> str:
            raise RuntimeError("cannot reach https://bot.example/?token=s3cr3t-token-42")

    exporter = InMemorySpanExporter()
    tracing.enable(exporter=exporter)
    redaction.register("s3cr3t-token-42")
    try:
        with pytest.raises(AgentError), tracing.turn_span(1):
            call_agent(Broken(), [Message("user", "hi")], timeout=10)
    finally:
        tracing.shutdown()
        redaction.clear()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"fabtest.turn 1", "invoke_agent Broken"}
    agent = spans["invoke_agent Broken"]
    assert agent.parent is not None and agent.parent.span_id == spans["fabtest.turn 1"].context.span_id
    assert agent.attributes["error.type"] == "AgentError" and agent.status.status_code.name == "ERROR"
    assert "***" in agent.status.description and "s3cr3t" not in agent.status.description
    assert all(not s.events for s in spans.values())  # no exception event with the raw message
    assert not tracing.enabled()


def test_without_the_setting_opentelemetry_is_never_imported() -> None:
    import subprocess

    code = ("import sys, fabtest.engine.turns, fabtest.tracing, fabtest.pytest_plugin.plugin\n"
            "from fabtest.engine.turns import call_agent\n"
            "from fabtest.agents.python import CallableAgent\n"
            "from fabtest.conversation import Message\n"
            "call_agent(CallableAgent(lambda messages: 'hi'), [Message('user', 'hi')], timeout=5)\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
