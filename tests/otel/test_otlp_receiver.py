"""fabtest's OTLP/HTTP receiver (agents/otlp_receiver.py) and what the judge is told about a turn
whose traces did not arrive (captured on the wire, google-genai against FakeGemini)."""

from __future__ import annotations

import gzip
import json
import socket
import textwrap
from pathlib import Path

import httpx
import pytest

from fabtest.agents import otlp_receiver
from fabtest.agents.otlp_receiver import Receiver
from fabtest.config.criteria import Criterion
from fabtest.config.settings import Settings
from fabtest.conversation import AgentResponse, Message
from fabtest.engine.llms import configured_llms
from fabtest.engine.scenario import ScenarioState
from fabtest.errors import UsageError
from fabtest.testing import FakeGemini

TRACE, ROOT = "ab" * 16, "cd" * 8
BODY = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "agent"}, "spans": [
    {"traceId": TRACE, "spanId": "01" * 8, "parentSpanId": ROOT, "name": "execute_tool lookup", "status": {"code": 2},
     "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                    {"key": "n", "value": {"intValue": "7"}}]}]}]}]}


@pytest.fixture
def receiver():
    found = Receiver(0)
    yield found
    found.close()


def test_json_bodies_plain_and_gzip_are_received_by_trace_id(receiver: Receiver) -> None:
    url = f"{receiver.endpoint}/v1/traces"
    assert httpx.post(url, json=BODY, timeout=5).status_code == 200
    assert httpx.post(url, content=gzip.compress(json.dumps(BODY).encode()), timeout=5,
                      headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}).status_code == 200
    spans = receiver.spans(TRACE)
    assert len(spans) == 2 and spans[0].parent_id == ROOT and spans[0].error
    assert spans[0].attributes == {"gen_ai.operation.name": "execute_tool", "n": 7}
    assert httpx.post(url, content=b"{not json", headers={"Content-Type": "application/json"}, timeout=5).status_code == 400
    assert httpx.post(f"{receiver.endpoint}/v1/logs", json=BODY, timeout=5).status_code == 404


def test_without_protobuf_a_protobuf_body_is_refused_with_the_way_out_and_json_still_works(
        receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otlp_receiver, "protobuf_available", lambda: False)
    url = f"{receiver.endpoint}/v1/traces"
    refused = httpx.post(url, content=b"\x0a\x00", headers={"Content-Type": "application/x-protobuf"}, timeout=5)
    assert refused.status_code == 415 and b"OTEL_EXPORTER_OTLP_PROTOCOL=http/json" in refused.content
    assert httpx.post(url, json=BODY, timeout=5).status_code == 200 and receiver.spans(TRACE)


def test_a_port_in_use_is_one_line_naming_the_setting() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(UsageError, match=r"^\[tool.fabtest.traces\] port = \d+: cannot receive traces") as info:
            Receiver(held.getsockname()[1])
    assert "\n" not in str(info.value)


class Untraced:
    """Says it exports traces and never sends a span."""

    exports_traces = True

    def chat(self, messages: list[Message]) -> AgentResponse:
        return AgentResponse("Your plan is changed.")


def test_the_judge_is_told_a_turns_tool_calls_are_unknown_and_grounding_is_inconclusive(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the line the judge reads "no tool call lines" as "no tool was called"."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(f"""
        [tool.fabtest.traces]
        port = {port}
        wait = 0.3
        [tool.fabtest.judge]
        max_retries = 0
        timeout = 5
    """))
    with FakeGemini(handler=lambda request: {"reasoning": "seen", "verdict": "passed"} if "verdicts" not in
                    ((request.schema or {}).get("properties") or {}) else
                    {"verdicts": [{"criterion": "asks", "reasoning": "seen", "verdict": "passed"}]}) as fake:
        for name, value in fake.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        settings = Settings.load(tmp_path)
        state = ScenarioState(settings=settings, rootdir=tmp_path, workdir=tmp_path, context={},
                              llms=configured_llms(settings, tmp_path), where="test", default_agent=Untraced())
        state.user_says("Switch me to unlimited")
        state.satisfy(Criterion("asks", "The agent checks the account before changing it"), "should", "conversation")
        state.grounded_in("change_plan", "should")
        state.finish()
        prompts = [r.prompt for r in fake.requests if "evaluator" in r.system]
    [prompt] = prompts  # the conversation criterion; grounding was not asked at all
    lines = prompt.splitlines()
    at = lines.index("turn 1 tool calls: unknown (the agent's traces of this turn did not arrive)")
    assert lines[at - 1].startswith("turn 1 user: ") and lines[at + 1].startswith("turn 1 agent: ")
    [grounded] = [c for c in state.conversation.evaluations if c.kind == "grounded_in"]
    assert grounded.status == "inconclusive" and "did not arrive" in grounded.details


# -- issue 38, 4 and 5: hostile bodies and a flood of foreign traces ------------------------------------
def _post(receiver: Receiver, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(f"{receiver.endpoint}/v1/traces", content=body, timeout=10,
                      headers={"Content-Type": "application/json", **headers})


def test_hostile_bodies_are_answered_400_or_413_never_a_dropped_connection(
        receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(otlp_receiver, "MAX_BODY", 1_000_000)
    zipped = gzip.compress(json.dumps(BODY).encode())
    bomb = gzip.compress(b"\0" * 1_000_000) * 20  # 20 members: ~20 KB that inflate to 20 MB
    answers = {
        "deep": _post(receiver, b"[" * 100_000),
        "truncated gzip": _post(receiver, zipped[:-12], **{"Content-Encoding": "gzip"}),
        "not gzip": _post(receiver, b"plain text", **{"Content-Encoding": "gzip"}),
        "a span that is a list": _post(receiver, json.dumps({"resourceSpans": [{"scopeSpans": [
            {"spans": [[1, 2]]}]}]}).encode()),
        "bomb": _post(receiver, bomb, **{"Content-Encoding": "gzip"}),
    }
    assert {name: a.status_code for name, a in answers.items()} == {
        "deep": 400, "truncated gzip": 400, "not gzip": 400, "a span that is a list": 400,
        "bomb": 413}
    assert b"more than 1000000 bytes once decompressed" in answers["bomb"].content
    assert _post(receiver, zipped, **{"Content-Encoding": "gzip"}).status_code == 200  # still serving


def test_a_gzip_body_is_inflated_no_further_than_the_limit() -> None:
    """The bound holds while inflating: a 20 MB bomb never takes more than the limit in memory."""
    import tracemalloc

    bomb = gzip.compress(b"\0" * 1_000_000) * 20
    tracemalloc.start()
    try:
        with pytest.raises(otlp_receiver.BodyTooLarge):
            otlp_receiver.inflate(bomb, 500_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3_000_000
    assert otlp_receiver.inflate(gzip.compress(b"a") + gzip.compress(b"b"), 10) == b"ab"  # members, as gzip reads


class Exporting:
    exports_traces = True


def test_a_flood_of_foreign_traces_does_not_push_out_a_turns_own_spans(
        receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    from fabtest.agents import trace_calls

    monkeypatch.setattr(otlp_receiver, "MAX_TRACES", 20)
    monkeypatch.setitem(otlp_receiver._receivers, receiver.port, receiver)
    with trace_calls.turn(Exporting(), port=receiver.port, wait=0.5) as seen:
        _, trace_id, parent, _ = trace_calls.headers()["traceparent"].split("-")
        own = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "agent"}, "spans": [
            {"traceId": trace_id, "spanId": "0a" * 8, "parentSpanId": parent, "name": "turn"},
            {"traceId": trace_id, "spanId": "0b" * 8, "parentSpanId": "0a" * 8, "name": "execute_tool lookup",
             "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                            {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}}]}]}]}]}
        assert httpx.post(f"{receiver.endpoint}/v1/traces", json=own, timeout=5).status_code == 200
        flood = {"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": f"{n:032x}", "spanId": "01" * 8, "name": "noise"} for n in range(1, 200)]}]}]}
        assert httpx.post(f"{receiver.endpoint}/v1/traces", json=flood, timeout=5).status_code == 200
        response = AgentResponse("Looked it up.")
        seen(response)
    assert [c.name for c in response.tool_calls] == ["lookup"]
    assert len(receiver._traces) <= 20


def test_a_body_shorter_than_announced_is_a_400_once_the_connection_is_silent(
        receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the handler thread waited for the missing bytes forever (10 s now; 0.3 s here)."""
    assert 0 < (receiver._server.RequestHandlerClass.timeout or 0) <= 30  # a bound of its own (None: forever)
    monkeypatch.setattr(receiver._server.RequestHandlerClass, "timeout", 0.3)
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=10) as raw:
        raw.sendall(f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{receiver.port}\r\nContent-Type: application/json"
                    "\r\nContent-Length: 100\r\n\r\n{}".encode())
        assert raw.recv(100).startswith(b"HTTP/1.0 400")
