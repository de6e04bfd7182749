"""OpenTelemetry spans: OTLP/JSON with the GenAI or the OpenInference attributes, and Phoenix's span export.

GenAI semantic conventions: ``gen_ai.conversation.id`` groups the spans of a conversation; a chat
span's ``gen_ai.input.messages`` / ``gen_ai.output.messages`` hold what the model saw and said;
an ``execute_tool`` span is one tool run (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``...arguments``, ``...result``). OpenInference (Arize Phoenix): ``session.id`` groups; an LLM span
holds ``llm.input_messages.<i>.message.*`` and ``llm.output_messages.<i>.message.*`` (flattened
lists), a TOOL span ``tool.name``, ``tool.parameters`` / ``input.value`` and ``output.value``. A
span with neither id is filed under its trace, which another span may name a conversation for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fabtest.agents.otlp_receiver import spans_from_json
from fabtest.errors import UsageError
from fabtest.production.events import Msg, arguments, event, first, genai_messages, result, seconds, text
from fabtest.production.formats.base import Format
from fabtest.production.grouping import Grouper
from fabtest.production.records import Record

__all__ = ["OTLP", "PHOENIX", "span_events"]


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested attributes as OpenInference writes them on the wire: ``a.b.0.c`` keys."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}{key}."))
        return out
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        out = {}
        for index, inner in enumerate(value):
            out.update(flatten(inner, f"{prefix}{index}."))
        return out
    return {prefix[:-1]: value}


_INDEX = re.compile(r"^(llm\.(?:input|output)_messages)\.(\d+)\.")


def _oi_messages(attrs: Mapping[str, Any], which: str) -> list[Msg]:
    indices = sorted({int(m.group(2)) for key in attrs if (m := _INDEX.match(key)) and m.group(1) == which})
    out: list[Msg] = []
    for i in indices:
        p = f"{which}.{i}.message."
        calls = []
        j = 0
        while f"{p}tool_calls.{j}.tool_call.function.name" in attrs:
            q = f"{p}tool_calls.{j}.tool_call."
            calls.append({"id": attrs.get(f"{q}id"), "name": str(attrs[f"{q}function.name"]),
                          "arguments": arguments(attrs.get(f"{q}function.arguments"))})
            j += 1
        body = attrs.get(f"{p}content")
        if body is None:
            body = "".join(str(v) for k, v in sorted(attrs.items())
                           if k.startswith(f"{p}contents.") and k.endswith(".message_content.text"))
        role = str(attrs.get(f"{p}role", ""))
        out.append({"role": {"model": "assistant", "ai": "assistant"}.get(role, role), "text": text(body),
                    "calls": calls, "call_id": attrs.get(f"{p}tool_call_id"),
                    "result": result(body) if role == "tool" else None})
    return out


def span_events(trace: str, attrs: Mapping[str, Any], t0: float, t1: float, *, name: str, root: bool,
                error: str | None, where: str, grouper: Grouper) -> None:
    """The event one span makes (GenAI or OpenInference attributes), filed under its conversation."""
    conversation = first([attrs.get("gen_ai.conversation.id"), attrs.get("session.id")])
    key = f"trace:{trace}"
    if conversation is not None:
        grouper.alias(key, str(conversation))
    conv = str(conversation) if conversation is not None else key
    kind = str(attrs.get("openinference.span.kind", "")).upper()
    op = attrs.get("gen_ai.operation.name")
    if op == "execute_tool" or kind == "TOOL":
        tool = {"id": first([attrs.get("gen_ai.tool.call.id"), attrs.get("tool_call.id"), attrs.get("tool.id")]),
                "name": str(first([attrs.get("gen_ai.tool.name"), attrs.get("tool.name"), name])),
                "arguments": arguments(first([attrs.get("gen_ai.tool.call.arguments"), attrs.get("tool.parameters"),
                                              attrs.get("input.value")])),
                "result": result(first([attrs.get("gen_ai.tool.call.result"), attrs.get("output.value")])),
                "error": error}
        grouper.add(event(conv, t0, t1, where=where, tool=tool))
        return
    if kind:
        msgs = _oi_messages(attrs, "llm.input_messages") + _oi_messages(attrs, "llm.output_messages")
        fallback = kind != "LLM"
        if fallback and root and not msgs and attrs.get("input.value") is not None:
            msgs = [{"role": "user", "text": str(attrs["input.value"]), "calls": [], "call_id": None, "result": None},
                    {"role": "assistant", "text": str(attrs.get("output.value") or ""), "calls": [],
                     "call_id": None, "result": None}]
        usage = (attrs.get("llm.token_count.prompt"), attrs.get("llm.token_count.completion"))
        model = attrs.get("llm.model_name")
    else:
        msgs = genai_messages(attrs.get("gen_ai.input.messages")) + genai_messages(attrs.get("gen_ai.output.messages"))
        fallback = op in ("invoke_agent", "create_agent")
        usage = (attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens"))
        model = first([attrs.get("gen_ai.response.model"), attrs.get("gen_ai.request.model")])
    counted = None if fallback or not any(usage) else (int(usage[0] or 0), int(usage[1] or 0))
    if msgs or counted:
        grouper.add(event(conv, t0, t1, where=where, msgs=msgs, model=str(model) if model else None, usage=counted,
                          fallback=fallback))


# -- OTLP/JSON -------------------------------------------------------------------------------------
def _otlp_probe(value: Any) -> str | None:
    if not isinstance(value, dict) or not isinstance(value.get("resourceSpans", value.get("resource_spans")), list):
        return "no 'resourceSpans' list"
    return None


def _otlp_read(record: Record, grouper: Grouper) -> None:
    """The spans as the OTLP receiver of black-box agents reads them (``agents/otlp_receiver.py``)."""
    try:
        spans = spans_from_json(record.value)
    except (TypeError, ValueError, KeyError) as exc:
        raise UsageError(f"{record.where}: not OTLP/JSON spans ({exc})") from None
    for span in spans:
        span_events(span.trace_id, span.attributes, seconds(span.start_ns), seconds(span.end_ns), name=span.name,
                    root=not span.parent_id, error="the span's status is ERROR" if span.error else None,
                    where=record.where, grouper=grouper)


OTLP = Format("otlp", "OpenTelemetry OTLP/JSON spans", _otlp_probe, _otlp_read)


# -- Phoenix span export -----------------------------------------------------------------------------
def _phoenix_probe(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "not an object"
    context = value.get("context")
    if not (isinstance(context, dict) and "span_id" in context) and "context.span_id" not in value:
        return "no span 'context' with a span_id"
    flat = flatten(value.get("attributes") or {})
    if "span_kind" not in value and "openinference.span.kind" not in flat:
        return "no OpenInference span_kind"
    return None


def _phoenix_read(record: Record, grouper: Grouper) -> None:
    value = record.value
    attrs = flatten(value.get("attributes") or {})
    attrs.update(flatten({k[len("attributes."):]: v for k, v in value.items() if k.startswith("attributes.")}))
    if value.get("span_kind"):
        attrs.setdefault("openinference.span.kind", value["span_kind"])
    context = value.get("context") if isinstance(value.get("context"), dict) else {}
    trace = first([context.get("trace_id"), value.get("context.trace_id")])
    error = value.get("status_message") or None if value.get("status_code") == "ERROR" else None
    span_events(str(trace), attrs, seconds(value.get("start_time")), seconds(value.get("end_time")),
                name=str(value.get("name", "")), root=not value.get("parent_id"), error=error, where=record.where,
                grouper=grouper)


PHOENIX = Format("phoenix", "Phoenix / OpenInference spans", _phoenix_probe, _phoenix_read)
