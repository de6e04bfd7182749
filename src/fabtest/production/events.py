"""What a format reader makes of a record: events of one conversation, in one plain shape.

A span, an observation or a chat line says a little about a conversation: the messages a model
saw and answered (``msgs``), one tool run (``tool``), when, and what it cost. Readers emit
:func:`event` dicts (plain JSON, so :mod:`.grouping` can spill them to disk); :mod:`.assemble`
puts one conversation's events back together. Messages are normalised here from the shapes the
exports use: OpenAI chat messages and the OpenTelemetry GenAI ``parts`` messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from fabtest.authoring.transcripts import tool_result as result

__all__ = ["Event", "Msg", "arguments", "event", "first", "genai_messages", "iso_time", "openai_messages", "result",
           "seconds", "text"]

#: ``{"role", "text", "calls": [{"id", "name", "arguments"}], "call_id", "result"}``
Msg = dict[str, Any]
#: ``{"c": conversation, "t0", "t1", "msgs", "tool", "model", "usage", "fallback", "where", "fmt"}``
Event = dict[str, Any]


def event(conversation: str, t0: float, t1: float, *, where: str, msgs: list[Msg] | None = None,
          tool: dict[str, Any] | None = None, model: str | None = None, usage: tuple[int, int] | None = None,
          fallback: bool = False) -> Event:
    """One event; ``fallback`` messages (an agent span's) count only when no model call was logged."""
    return {"c": conversation, "t0": t0, "t1": max(t1, t0), "msgs": msgs or [], "tool": tool, "model": model,
            "usage": list(usage) if usage else None, "fallback": fallback, "where": where}


def text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or p.get("content") or "") for p in content
                       if isinstance(p, Mapping) and p.get("type", "text") in ("text", "input_text", "output_text"))
    return ""


def arguments(raw: Any) -> dict[str, Any]:
    """Tool arguments as a dict: a JSON string is parsed; anything else that is not a dict is ``{"input": raw}``."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"input": raw}
    if isinstance(raw, Mapping):
        return dict(raw)
    return {} if raw is None else {"input": raw}


def _msg(role: str, body: str = "", calls: list[dict[str, Any]] | None = None, call_id: Any = None,
         output: Any = None) -> Msg:
    role = {"model": "assistant", "ai": "assistant", "human": "user", "function": "tool", "developer": "system"}.get(
        role, role)
    return {"role": role, "text": body, "calls": calls or [], "call_id": None if call_id is None else str(call_id),
            "result": output}


def openai_messages(raw: Any) -> list[Msg]:
    """OpenAI chat messages (``[{role, content, tool_calls}]``, ``{"messages": [...]}``, or one message)."""
    if isinstance(raw, Mapping) and isinstance(raw.get("messages"), list):
        raw = raw["messages"]
    if isinstance(raw, Mapping) and isinstance(raw.get("choices"), list):  # a chat completion
        raw = [c.get("message") for c in raw["choices"][:1] if isinstance(c, Mapping)]
    if isinstance(raw, Mapping) and "role" in raw:
        raw = [raw]
    out: list[Msg] = []
    for m in raw if isinstance(raw, list) else []:
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
            continue
        calls = []
        for c in m.get("tool_calls") or []:
            if isinstance(c, Mapping):
                fn: Mapping[str, Any] = c["function"] if isinstance(c.get("function"), Mapping) else c
                calls.append({"id": c.get("id"), "name": str(fn.get("name", "")),
                              "arguments": arguments(fn.get("arguments"))})
        content = m.get("content")
        out.append(_msg(m["role"], text(content), calls, m.get("tool_call_id"),
                        result(text(content)) if m["role"] == "tool" else None))
    return out


def genai_messages(raw: Any) -> list[Msg]:
    """OpenTelemetry GenAI messages: ``[{role, parts: [{type: text|tool_call|tool_call_response, ...}]}]``
    (``gen_ai.input.messages`` / ``gen_ai.output.messages``, a JSON string on the wire)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    out: list[Msg] = []
    for m in raw if isinstance(raw, list) else []:
        if not isinstance(m, Mapping):
            continue
        parts = [p for p in m.get("parts") or [] if isinstance(p, Mapping)]
        body = "".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")
        calls = [{"id": p.get("id"), "name": str(p.get("name", "")), "arguments": arguments(p.get("arguments"))}
                 for p in parts if p.get("type") == "tool_call"]
        responses = [p for p in parts if p.get("type") == "tool_call_response"]
        if responses:
            out += [_msg("tool", "", None, p.get("id"), result(p.get("response", p.get("result")))) for p in responses]
        else:
            out.append(_msg(str(m.get("role", "")), body, calls))
    return out


def seconds(value: Any) -> float:
    """A time as Unix seconds: nanoseconds (int or digit string), or ISO 8601 text; 0.0 when absent."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.isdigit()):
        number = float(value)
        return number / 1e9 if number > 1e14 else number / 1e3 if number > 1e11 else number
    if isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return 0.0
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    return 0.0


def iso_time(unix: float) -> str:
    """Unix seconds as ISO 8601 UTC (``""`` for 0: no time logged)."""
    if not unix:
        return ""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def first(values: Iterable[Any]) -> Any:
    """The first value that is not None or empty."""
    return next((v for v in values if v not in (None, "")), None)
