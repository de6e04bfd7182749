"""OpenAI chat JSON Lines: one conversation per line, ``{"messages": [...]}`` (the fine-tuning and
evals shape), with an optional ``id`` / ``conversation_id`` / ``metadata.conversation_id`` and time."""

from __future__ import annotations

from typing import Any

from fabtest.production.events import event, first, openai_messages, seconds
from fabtest.production.formats.base import Format
from fabtest.production.grouping import Grouper
from fabtest.production.records import Record

__all__ = ["OPENAI"]


def _probe(value: Any) -> str | None:
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return "no 'messages' list"
    if not any(isinstance(m, dict) and m.get("role") == "user" for m in value["messages"]):
        return "'messages' has no message with role 'user'"
    return None


def _read(record: Record, grouper: Grouper) -> None:
    value = record.value
    meta = value.get("metadata") if isinstance(value.get("metadata"), dict) else {}
    conversation = first([value.get("conversation_id"), meta.get("conversation_id"), meta.get("session_id"),
                          value.get("id"), record.where])
    t = seconds(first([value.get("timestamp"), value.get("created_at"), value.get("created"), meta.get("timestamp")]))
    grouper.add(event(str(conversation), t, t, where=record.where, msgs=openai_messages(value["messages"])))


OPENAI = Format("openai", "OpenAI chat messages (JSON Lines)", _probe, _read)
