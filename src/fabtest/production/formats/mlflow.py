"""MLflow traces as ``Trace.to_json()`` / ``mlflow traces get`` write them: ``{"info": ..., "data": {"spans": [...]}}``.

MLflow 3 names the trace ``info.trace_id`` and groups a conversation by the ``mlflow.trace.session``
metadata (MLflow 2: ``request_id``, ``request_metadata``); without one the trace is the
conversation. Span attribute values are JSON text. A ``CHAT_MODEL`` or ``LLM`` span is a model
call: ``mlflow.chat.messages`` (OpenAI messages, the reply included) or its ``mlflow.spanInputs``
``messages`` and ``mlflow.spanOutputs``; ``mlflow.chat.tokenUsage`` its tokens. A ``TOOL`` span is
a tool run named by the span, its inputs the arguments and its outputs the result. A trace with no
model span falls back on its root span's inputs and outputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fabtest.production.events import Msg, arguments, event, first, openai_messages, seconds, text
from fabtest.production.formats.base import Format
from fabtest.production.grouping import Grouper
from fabtest.production.records import Record

__all__ = ["MLFLOW"]


def _probe(value: Any) -> str | None:
    if not isinstance(value, dict) or not isinstance(value.get("info"), dict):
        return "no 'info' object"
    data = value.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("spans"), list):
        return "no 'data.spans' list"
    return None


def _decoded(attrs: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, raw in attrs.items():
        try:
            out[key] = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            out[key] = raw
    return out


def _said(raw: Any, role: str) -> list[Msg]:
    msgs = openai_messages(raw)
    if msgs:
        return msgs
    if isinstance(raw, Mapping):
        raw = first([raw.get(k) for k in ("content", "query", "question", "input", "output", "answer", "response")])
    said = text(raw)
    return [{"role": role, "text": said, "calls": [], "call_id": None, "result": None}] if said else []


def _read(record: Record, grouper: Grouper) -> None:
    info, spans = record.value["info"], record.value["data"]["spans"]
    meta = {**(info.get("tags") or {}), **(info.get("request_metadata") or {}), **(info.get("trace_metadata") or {})}
    trace = first([info.get("trace_id"), info.get("request_id")])
    conv = str(first([meta.get("mlflow.trace.session"), trace, record.where]))
    models, root = 0, None
    for span in spans:
        if not isinstance(span, Mapping):
            continue
        attrs = _decoded(span.get("attributes") or {})
        kind = str(attrs.get("mlflow.spanType", "")).upper()
        t0 = seconds(first([span.get("start_time_unix_nano"), span.get("start_time")]))
        t1 = seconds(first([span.get("end_time_unix_nano"), span.get("end_time")]))
        inputs, outputs = attrs.get("mlflow.spanInputs"), attrs.get("mlflow.spanOutputs")
        if not first([span.get("parent_span_id"), span.get("parent_id")]):
            root = (t0, t1, inputs, outputs)
        if kind in ("CHAT_MODEL", "LLM"):
            msgs = openai_messages(attrs["mlflow.chat.messages"]) if attrs.get("mlflow.chat.messages") else (
                _said(inputs, "user") + _said(outputs, "assistant"))
            usage = attrs.get("mlflow.chat.tokenUsage")
            tokens = (int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)) \
                if isinstance(usage, Mapping) else None
            model = inputs.get("model") if isinstance(inputs, Mapping) else None
            grouper.add(event(conv, t0, t1, where=record.where, msgs=msgs, model=model, usage=tokens))
            models += 1
        elif kind == "TOOL":
            status: Mapping[str, Any] = span["status"] if isinstance(span.get("status"), Mapping) else {}
            error = status.get("message") or None if "ERROR" in str(status.get("code", "")) else None
            grouper.add(event(conv, t0, t1, where=record.where, tool={
                "id": None, "name": str(span.get("name", "")), "arguments": arguments(inputs),
                "result": outputs, "error": error}))
    if not models and root is not None:
        grouper.add(event(conv, root[0], root[1], where=record.where, fallback=True,
                          msgs=_said(root[2], "user") + _said(root[3], "assistant")))


MLFLOW = Format("mlflow", "MLflow traces", _probe, _read)
