"""What the protocol adapters (A2A, AG-UI) share about pauses: the calls a decision lets go ahead, and a
decision as words and as data.

A protocol agent asks for approval of a tool call it has not made yet (ADK's long-running call in an
A2A ``input-required`` task, a tool call an AG-UI interrupt names); the user's decision comes back on
the next message (:class:`~fabtest.conversation.Decision`). An approved call is recorded as a call of
the next turn, so its result (sent when the agent resumes) lands on it and ``must call "refund"``
sees it; a rejected one never becomes a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fabtest.conversation import Decision, Message, Pause

__all__ = ["approved_calls", "decision_data", "decision_words", "previous_pauses"]


def previous_pauses(messages: Sequence[Message]) -> dict[str, Pause]:
    """The pauses the agent ended its previous message on, by id."""
    previous = next((m for m in reversed(messages[:-1]) if m.role == "agent"), None)
    return {p.id: p for p in previous.pauses} if previous is not None else {}


def approved_calls(messages: Sequence[Message]) -> list[tuple[str | None, str, dict[str, Any]]]:
    """``(call id, tool, arguments)`` of each approval the last user message approves (edited: the new
    arguments)."""
    pauses = previous_pauses(messages)
    out: list[tuple[str | None, str, dict[str, Any]]] = []
    for decision in messages[-1].decisions:
        pause = pauses.get(decision.pause_id)
        if pause is not None and pause.kind == "approval" and pause.tool and decision.approved:
            arguments = decision.arguments if decision.arguments is not None else pause.arguments
            out.append((pause.metadata.get("call_id"), pause.tool, dict(arguments)))
    return out


def decision_words(decision: Decision) -> str:
    """The decision as a person would type it, for a message that carries no words of the user's own."""
    if decision.decision == "answered":
        return decision.answer or ""
    if decision.decision == "edited":
        import json

        return f"Approved, with these arguments: {json.dumps(decision.arguments, ensure_ascii=False)}"
    said = f": {decision.reason}" if decision.reason else "."
    return ("Approved" if decision.decision == "approved" else "Rejected") + said


def decision_data(decision: Decision) -> dict[str, Any]:
    """The decision as JSON for the agent's code: ``{decision, approved, reason?, arguments?}``."""
    out: dict[str, Any] = {"decision": decision.decision, "approved": decision.approved}
    if decision.reason:
        out["reason"] = decision.reason
    if decision.arguments is not None:
        out["arguments"] = decision.arguments
    return out
