"""Tool calls read from the agent's own OpenTelemetry spans: a black-box agent's tools, seen.

An agent that says it exports traces (``traces = true`` in its agent table) gets a W3C
``traceparent`` with every turn (fabtest's agent-call span when ``otel`` is on, else a fresh trace
per turn), exports its spans to the receiver of :mod:`fabtest.agents.otlp_receiver`, and fabtest
waits (at most ``[tool.fabtest.traces] wait`` seconds) for the span that ``traceparent`` parents:
the agent's own span around the turn, which ends after everything it contains. Every GenAI tool
span under it (``gen_ai.operation.name = execute_tool``) becomes one of the turn's tool calls
(``gen_ai.tool.name``, ``gen_ai.tool.call.arguments`` / ``.result`` / ``.id`` where present),
marked ``"source": "traces"`` in its metadata. When nothing arrives in time the turn says so
(:func:`missing`), and tool checks on it are inconclusive, never passed.
"""

from __future__ import annotations

import contextvars
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fabtest import tracing
from fabtest.agents.boundary import merge_tool_calls
from fabtest.agents.otlp_receiver import DEFAULT_PORT, Span, iter_descendants, receiver
from fabtest.conversation import AgentResponse, ToolCall, json_or_text, jsonable

__all__ = ["DEFAULT_PORT", "DEFAULT_WAIT_S", "METADATA_KEY", "TurnTrace", "environment", "exports_flag", "headers",
           "missing", "tool_calls", "turn"]

#: seconds fabtest waits for a turn's spans by default (an SDK's batch exporter sends every 5 s)
DEFAULT_WAIT_S = 10.0
#: the key of a turn's response metadata that says what the traces gave (or why they did not)
METADATA_KEY = "fabtest.traces"
#: the instrumentation scope of fabtest's own spans (when they reach the receiver too, they are not the agent's)
_OWN_SCOPE = "fabtest"


@dataclass(frozen=True)
class TurnTrace:
    """Where the agent's spans of one turn hang: the trace and the parent span fabtest sends."""

    trace_id: str
    parent_id: str
    fresh: bool  # a trace of its own (forgotten after the turn), not fabtest's scenario trace

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.parent_id}-01"


_current: contextvars.ContextVar[TurnTrace | None] = contextvars.ContextVar("fabtest_turn_trace", default=None)


def headers() -> dict[str, str]:
    """The headers an HTTP agent's request carries: fabtest's ``traceparent`` when tracing, or the
    turn's own when the agent exports traces and fabtest does not trace."""
    out = tracing.inject_headers({})
    current = _current.get()
    if current is not None and "traceparent" not in out:
        out["traceparent"] = current.traceparent
    return out


def environment() -> dict[str, str]:
    """The turn's trace context for a CLI agent's process: ``TRACEPARENT`` / ``TRACESTATE`` /
    ``BAGGAGE``, the names of OpenTelemetry's environment-variable carriers (the W3C header names in
    upper case), so a CLI that extracts its parent from the environment continues the turn's trace."""
    return {name.upper(): value for name, value in headers().items()}


def exports_flag(traces: object, where: str) -> bool:
    """An agent table's ``traces = true|false``, checked: any other value is a usage mistake."""
    if not isinstance(traces, bool):
        raise TypeError(f"{where}: traces: expected true or false, got {traces!r}")
    return traces


def _new_turn() -> TurnTrace:
    ids = tracing.current_ids()  # fabtest's agent-call span: the agent's spans join fabtest's trace
    if ids is not None:
        return TurnTrace(ids[0], ids[1], fresh=False)
    return TurnTrace(secrets.token_hex(16), secrets.token_hex(8), fresh=True)


@contextmanager
def turn(agent: Any, *, port: int = DEFAULT_PORT,
         wait: float = DEFAULT_WAIT_S) -> Iterator[Callable[[AgentResponse], None]]:
    """Around one agent call: yields ``seen(response)``, which waits for the turn's spans and adds
    their tool calls to ``response`` (a no-op for an agent that does not export traces)."""
    if not getattr(agent, "exports_traces", False):
        yield lambda response: None
        return
    spans_from = receiver(port)
    current = _new_turn()
    spans_from.expect(current.trace_id)  # kept however many foreign traces arrive meanwhile
    token = _current.set(current)
    try:
        yield lambda response: _collect(response, spans_from, current, wait)
    finally:
        _current.reset(token)
        spans_from.release(current.trace_id)


def _collect(response: AgentResponse, spans_from: Any, current: TurnTrace, wait: float) -> None:
    def arrived(spans: list[Span]) -> bool:
        return any(s.parent_id == current.parent_id and s.scope != _OWN_SCOPE for s in spans)

    spans = spans_from.wait(current.trace_id, arrived, wait)
    if current.fresh:
        spans_from.forget(current.trace_id)
    mine = [s for s in iter_descendants(spans, current.parent_id) if s.scope != _OWN_SCOPE]
    if not arrived(spans):
        response.metadata[METADATA_KEY] = {
            "trace_id": current.trace_id, "spans": len(mine),
            "missing": f"the agent exports traces, but its span for the turn (trace {current.trace_id}) did not "
                       f"arrive at {spans_from.endpoint} within {wait:g}s"}
        return
    calls = tool_calls(mine)
    response.metadata[METADATA_KEY] = {"trace_id": current.trace_id, "spans": len(mine), "tool_calls": len(calls)}
    if calls:
        response.tool_calls = merge_tool_calls(response.tool_calls, calls)


def missing(response: AgentResponse) -> str | None:
    """Why the turn's tool calls are not known (its traces did not arrive), or None."""
    seen = response.metadata.get(METADATA_KEY) if isinstance(response.metadata, dict) else None
    return str(seen["missing"]) if isinstance(seen, dict) and seen.get("missing") else None


def tool_calls(spans: list[Span]) -> list[ToolCall]:
    """The GenAI tool spans among ``spans`` as tool calls, in the order they started."""
    out = []
    for span in sorted(spans, key=lambda s: s.start_ns):
        attrs = span.attributes
        if attrs.get("gen_ai.operation.name") != "execute_tool":
            continue
        name = attrs.get("gen_ai.tool.name") or span.name.removeprefix("execute_tool").strip()
        if not name:
            continue
        arguments = json_or_text(attrs.get("gen_ai.tool.call.arguments"))
        meta: dict[str, Any] = {"source": "traces", "span_id": span.span_id}
        if attrs.get("gen_ai.tool.call.id") is not None:
            meta["id"] = str(attrs["gen_ai.tool.call.id"])
        if span.error:
            meta["error"] = True
        out.append(ToolCall(str(name), arguments if isinstance(arguments, dict) else
                            {} if arguments is None else {"arguments": arguments},
                            jsonable(json_or_text(attrs.get("gen_ai.tool.call.result"))), meta))
    return out
