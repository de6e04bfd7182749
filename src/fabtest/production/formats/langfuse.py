"""Langfuse exports: a trace download (the trace with its ``observations``), a session download
(``traces``), API pages of traces, or observations one per line (the table export as JSON Lines).

A trace's ``sessionId`` groups its traces into one conversation (else the trace is one). A
``GENERATION`` observation is a model call: its ``input`` the messages sent (OpenAI shape, or a
string), its ``output`` the reply; its ``usageDetails`` (or ``usage``) the tokens. A ``TOOL``
observation is a tool run: ``name``, ``input`` (the arguments), ``output`` (the result). A trace
with no generation falls back on its own ``input`` / ``output`` as one exchange.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fabtest.production.events import Msg, arguments, event, first, openai_messages, result, seconds, text
from fabtest.production.formats.base import Format
from fabtest.production.grouping import Grouper
from fabtest.production.records import Record

__all__ = ["LANGFUSE"]

_TYPES = {"GENERATION", "SPAN", "EVENT", "TOOL", "AGENT", "CHAIN", "RETRIEVER", "EMBEDDING", "EVALUATOR", "GUARDRAIL"}


def _probe(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "not an object"
    if isinstance(value.get("observations"), list) or isinstance(value.get("traces"), list):
        return None
    if value.get("traceId") and str(value.get("type", "")).upper() in _TYPES:
        return None
    return "no 'observations' or 'traces', nor an observation with traceId and type"


def _messages(raw: Any, role: str) -> list[Msg]:
    """A generation's input or output: chat messages, a completion, or plain text said by ``role``."""
    msgs = openai_messages(raw)
    if msgs:
        return msgs
    if isinstance(raw, Mapping):
        raw = first([raw.get(k) for k in ("content", "text", "message", "query", "input", "output")])
    said = text(raw) if not isinstance(raw, (int, float)) else str(raw)
    return [{"role": role, "text": said, "calls": [], "call_id": None, "result": None}] if said else []


def _tokens(obs: Mapping[str, Any]) -> tuple[int, int] | None:
    for key, inp, out in (("usageDetails", "input", "output"), ("usage", "input", "output"),
                          ("usage", "promptTokens", "completionTokens"), ("usage", "input_tokens", "output_tokens")):
        usage = obs.get(key)
        if isinstance(usage, Mapping) and (usage.get(inp) or usage.get(out)):
            return int(usage.get(inp) or 0), int(usage.get(out) or 0)
    return None


def _observation(obs: Mapping[str, Any], conv: str, where: str, grouper: Grouper) -> bool:
    """One observation's event; True when it was a model call (a generation)."""
    kind = str(obs.get("type", "")).upper()
    t0, t1 = seconds(obs.get("startTime")), seconds(obs.get("endTime") or obs.get("startTime"))
    if kind == "GENERATION":
        msgs = _messages(obs.get("input"), "user") + _messages(obs.get("output"), "assistant")
        grouper.add(event(conv, t0, t1, where=where, msgs=msgs, model=obs.get("model") or None, usage=_tokens(obs)))
        return True
    if kind == "TOOL":
        error = obs.get("statusMessage") if obs.get("level") == "ERROR" else None
        grouper.add(event(conv, t0, t1, where=where, tool={
            "id": None, "name": str(obs.get("name", "")), "arguments": arguments(obs.get("input")),
            "result": result(obs.get("output")), "error": error}))
    return False


def _trace(trace: Mapping[str, Any], observations: list[Any], session: Any, where: str, grouper: Grouper) -> None:
    conv = str(first([session, trace.get("sessionId"), trace.get("id")]))
    generations = sum(_observation(o, conv, where, grouper) for o in observations if isinstance(o, Mapping))
    if not generations and trace.get("input") is not None:
        t = seconds(trace.get("timestamp"))
        msgs = _messages(trace.get("input"), "user") + _messages(trace.get("output"), "assistant")
        grouper.add(event(conv, t, t + float(trace.get("latency") or 0), where=where, msgs=msgs, fallback=True))


def _read(record: Record, grouper: Grouper) -> None:
    value = record.value
    if isinstance(value.get("traces"), list):  # a session download
        session = first([value.get("id"), value.get("sessionId")])
        for trace in value["traces"]:
            if isinstance(trace, Mapping):
                _trace(trace, list(trace.get("observations") or []), session, record.where, grouper)
        return
    if isinstance(value.get("observations"), list):  # a trace download ({trace, observations} or the trace itself)
        trace = value["trace"] if isinstance(value.get("trace"), Mapping) else value
        _trace(trace, value["observations"], None, record.where, grouper)
        return
    key = f"trace:{value['traceId']}"  # one observation of the table export
    if value.get("sessionId"):
        grouper.alias(key, str(value["sessionId"]))
    _observation(value, key, record.where, grouper)


LANGFUSE = Format("langfuse", "Langfuse traces", _probe, _read)
