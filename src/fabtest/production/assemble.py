"""One conversation's events put back together as turns.

Tracing tools log a model call's whole input history on every call, or only its newest message,
and an agent's turn may be several model calls and tool runs. So the messages of successive events
are laid end to end without repeating what was already seen (the longest overlap of what is known
with the start of each event's messages), system messages left out. A user message opens a turn;
the agent's messages and tool calls until the next one fill it. A tool run (an ``execute_tool`` or
TOOL span) gives its result to the call of the same id, else to an unanswered call of the same
name (or the call with the same arguments a tool message answered), else becomes a call of the
turn it happened in. A turn's latency runs from the start of the event that brought its user
message to the end of the last event that brought its reply; its usage is the model calls' tokens
logged in it, by model.
"""

from __future__ import annotations

from typing import Any

from fabtest.conversation import ToolCall
from fabtest.production.events import Event, Msg, iso_time
from fabtest.production.logged import LoggedConversation, LoggedTurn

__all__ = ["assemble"]


def _key(m: Msg) -> tuple[Any, ...]:
    return m["role"], " ".join(str(m["text"]).split()), tuple(c["name"] for c in m["calls"]), m["call_id"]


def _overlap(known: list[tuple[Any, ...]], new: list[tuple[Any, ...]]) -> int:
    for k in range(min(len(known), len(new)), 0, -1):
        if known[-k:] == new[:k]:
            return k
    return 0


class _Builder:
    def __init__(self) -> None:
        self.turns: list[LoggedTurn] = []
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.calls: dict[str, ToolCall] = {}

    def message(self, m: Msg, t0: float, t1: float) -> None:
        if m["role"] == "user":
            self.turns.append(LoggedTurn(user=m["text"]))
            self.starts.append(t0)
            self.ends.append(t1)
            return
        if not self.turns:
            return  # the agent spoke first: an opening message, as fabtest import leaves it out
        turn = self.turns[-1]
        if m["role"] == "assistant":
            if m["text"]:
                turn.agent = f"{turn.agent}\n{m['text']}" if turn.agent else m["text"]
            for c in m["calls"]:
                call = ToolCall(c["name"], dict(c["arguments"]))
                turn.tool_calls.append(call)
                if c.get("id"):
                    self.calls[str(c["id"])] = call
            self.ends[-1] = max(self.ends[-1], t1)
        elif m["role"] == "tool":
            answered = self.calls.get(str(m["call_id"]))
            if answered is not None and answered.result is None:
                answered.result = m["result"]

    def turn_at(self, t: float) -> int:
        """The index of the turn running at time ``t`` (the last one that started by then)."""
        index = 0
        for i, start in enumerate(self.starts):
            if start <= t or not t:
                index = i
        return index

    def tool(self, tool: dict[str, Any], t0: float, t1: float) -> None:
        if not self.turns:
            return
        call = self.calls.get(str(tool.get("id"))) if tool.get("id") else None
        index = self.turn_at(t0)
        same = [c for c in self.turns[index].tool_calls if c.name == tool["name"]]
        if call is None:  # an unanswered call of that name, else the answered one with these arguments
            call = next((c for c in same if c.result is None), None) or next(
                (c for c in same if c.arguments == tool.get("arguments")), None)
        if call is None:
            call = ToolCall(tool["name"], dict(tool.get("arguments") or {}))
            self.turns[index].tool_calls.append(call)
        if call.result is None:
            call.result = tool.get("result")
        if tool.get("error"):
            call.metadata["error"] = tool["error"]
        self.ends[index] = max(self.ends[index], t1)

    def usage(self, ev: Event) -> None:
        if not self.turns or not ev.get("usage"):
            return
        turn = self.turns[self.turn_at(ev["t0"])]
        inp, out = (int(x or 0) for x in ev["usage"])
        usage = turn.metadata.setdefault("usage", {"input_tokens": 0, "output_tokens": 0})
        usage["input_tokens"] += inp
        usage["output_tokens"] += out
        model = ev.get("model")
        if model:
            turn.metadata.setdefault("model", model)
            part = usage.setdefault("models", {}).setdefault(model, {"input_tokens": 0, "output_tokens": 0})
            part["input_tokens"] += inp
            part["output_tokens"] += out


def assemble(conversation: str, events: list[Event], *, fmt: str) -> LoggedConversation:
    """The conversation ``events`` (sorted by time) describe."""
    chat = [e for e in events if e["msgs"] and not e["fallback"]] or [e for e in events if e["msgs"]]
    chosen = {id(e) for e in chat}
    builder, known = _Builder(), list[tuple[Any, ...]]()
    tools: list[Event] = []
    for ev in events:
        if id(ev) in chosen:
            msgs = [m for m in ev["msgs"] if m["role"] != "system"]
            keys = [_key(m) for m in msgs]
            seen = _overlap(known, keys)
            for m, key in zip(msgs[seen:], keys[seen:], strict=True):
                builder.message(m, ev["t0"], ev["t1"])
                known.append(key)
        if ev.get("tool"):
            tools.append(ev)
    for ev in tools:
        builder.tool(ev["tool"], ev["t0"], ev["t1"])
    for ev in events:
        builder.usage(ev)
    for turn, start, end in zip(builder.turns, builder.starts, builder.ends, strict=True):
        turn.duration_s = round(max(0.0, end - start), 4) if start and end else 0.0
    times = [e["t0"] for e in events if e["t0"]]
    return LoggedConversation(conversation, builder.turns, timestamp=iso_time(min(times) if times else 0.0),
                              source=str(events[0]["where"]) if events else "", format=fmt)
