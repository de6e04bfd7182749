"""Conversations saved by an agent framework, read into fabtest's plain turns for ``fabtest import``.

Teams keep the history their framework gives them, so each of these is read as saved, tool calls
included:

* ``openai-agents``: the OpenAI Agents SDK's ``result.to_input_list()`` (or a session's items):
  messages (``{role, content}``, ``input_text`` / ``output_text`` parts), ``function_call`` items
  (a handoff's ``transfer_to_*`` too) and the ``function_call_output`` answering each ``call_id``;
* ``langchain``: a LangChain / LangGraph message list: ``messages_to_dict`` (``{type, data}``),
  ``message.model_dump()`` (``{type: human|ai|tool, content, tool_calls}``) or ``dumpd``
  (``{lc, id: [..., "AIMessage"], kwargs}``); ``AIMessage.tool_calls`` and the ``ToolMessage``
  answering each ``tool_call_id``;
* ``adk``: a Google ADK session's events (``session.model_dump()``: ``{events: [...]}``, or the
  list of events): ``function_call`` parts and the ``function_response`` of the same id.

Every tool result goes through :func:`fabtest.authoring.recorded.tool_result`, the one parser
of tool results (JSON text parsed).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fabtest.authoring.recorded import RecordedConversation, Turns, message_text, tool_arguments, tool_result
from fabtest.conversation import ToolCall

__all__ = ["FRAMEWORK_FORMATS", "detect_framework", "read_framework"]

FRAMEWORK_FORMATS = ("openai-agents", "langchain", "adk")

_LANGCHAIN_TYPES = {"human": "user", "HumanMessage": "user", "ai": "agent", "AIMessage": "agent",
                    "AIMessageChunk": "agent", "tool": "tool", "ToolMessage": "tool", "system": "system",
                    "SystemMessage": "system"}


def detect_framework(items: list[Mapping[str, Any]]) -> str | None:
    """The framework format a list of objects is saved in, or None."""
    if any("author" in m and isinstance(m.get("content"), Mapping) for m in items):
        return "adk"
    if any(m.get("type") in ("function_call", "function_call_output") or
           (m.get("type") == "message" and "role" in m) for m in items):
        return "openai-agents"
    if any("lc" in m or (m.get("type") in _LANGCHAIN_TYPES and ("data" in m or "content" in m)) for m in items):
        return "langchain"
    return None


def read_framework(fmt: str, items: list[Mapping[str, Any]], path: Path) -> RecordedConversation:
    """``items`` (the saved list) as turns, in the framework format ``fmt``."""
    reader = {"openai-agents": _openai_agents, "langchain": _langchain, "adk": _adk}[fmt]
    turns = reader(items, path)
    return RecordedConversation(path.stem, fmt, turns.turns, skipped=turns.skipped)


def _openai_agents(items: list[Mapping[str, Any]], path: Path) -> Turns:
    turns, by_id = Turns(), dict[Any, ToolCall]()
    for item in items:
        kind, role = item.get("type"), item.get("role")
        if kind == "function_call":
            call = ToolCall(str(item.get("name", "")), tool_arguments(item.get("arguments"), path))
            by_id[item.get("call_id")] = call
            turns.agent("", [call])
        elif kind == "function_call_output":
            if (answered := by_id.get(item.get("call_id"))) is not None:
                output = item.get("output")
                answered.result = tool_result(message_text(output) if isinstance(output, list) else output)
        elif role == "user":
            turns.user(message_text(item.get("content")))
        elif role == "assistant":
            turns.agent(message_text(item.get("content")))
        elif role in ("system", "developer"):
            turns.skipped += 1
        # reasoning and hosted-tool items carry nothing a feature replays
    return turns


def _langchain_message(item: Mapping[str, Any]) -> tuple[str | None, Mapping[str, Any]]:
    """A saved LangChain message as (its role, its fields), whichever way it was dumped."""
    if "lc" in item and isinstance(item.get("kwargs"), Mapping):
        ids = item.get("id")
        name = ids[-1] if isinstance(ids, list) and ids else ""
        return _LANGCHAIN_TYPES.get(str(name)), item["kwargs"]
    fields = item["data"] if isinstance(item.get("data"), Mapping) else item
    return _LANGCHAIN_TYPES.get(str(item.get("type") or fields.get("type"))), fields


def _langchain(items: list[Mapping[str, Any]], path: Path) -> Turns:
    turns, by_id = Turns(), dict[Any, ToolCall]()
    for item in items:
        role, fields = _langchain_message(item)
        if role == "user":
            turns.user(message_text(fields.get("content")))
        elif role == "agent":
            calls = []
            for raw in fields.get("tool_calls") or []:
                if isinstance(raw, Mapping):
                    call = ToolCall(str(raw.get("name", "")), tool_arguments(raw.get("args"), path))
                    by_id[raw.get("id")] = call
                    calls.append(call)
            turns.agent(message_text(fields.get("content")), calls)
        elif role == "tool":
            if (answered := by_id.get(fields.get("tool_call_id"))) is not None:
                content = fields.get("content")
                answered.result = tool_result(message_text(content) if isinstance(content, list) else content)
        else:
            turns.skipped += 1
    return turns


def _part(part: Mapping[str, Any], snake: str, camel: str) -> Mapping[str, Any] | None:
    found = part.get(snake, part.get(camel))
    return found if isinstance(found, Mapping) else None


def _adk(events: list[Mapping[str, Any]], path: Path) -> Turns:
    turns, by_id = Turns(), dict[Any, ToolCall]()
    for event in events:
        content = event.get("content")
        parts = [p for p in (content.get("parts") if isinstance(content, Mapping) else None) or []
                 if isinstance(p, Mapping)]
        text = "".join(p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))
        calls = []
        for part in parts:
            if (call := _part(part, "function_call", "functionCall")) is not None:
                recorded = ToolCall(str(call.get("name", "")), tool_arguments(call.get("args"), path))
                by_id[call.get("id") or call.get("name")] = recorded
                calls.append(recorded)
            elif (response := _part(part, "function_response", "functionResponse")) is not None:
                answered = by_id.get(response.get("id") or response.get("name"))
                if answered is not None:
                    answered.result = tool_result(response.get("response"))
        if event.get("author") == "user" and text:
            turns.user(text)
        elif event.get("author") != "user" and (text or calls):
            turns.agent(text, calls)
    return turns
