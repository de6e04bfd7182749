"""Handoffs: one agent of a multi-agent system passing the conversation to another.

The framework adapters record each handoff of a turn in its metadata as ``handoffs``, a list of
``{"from": agent, "to": agent, "tool": the call that asked for it}`` as the framework names them
(the OpenAI Agents SDK's ``HandoffOutputItem``, ADK's ``transfer_to_agent`` action, a LangGraph
agent's ``AIMessage.name`` changing). The call that asked for it is one of the turn's tool calls
too (``transfer_to_seat_booking_agent``), so ``must call`` sees it; ``must hand off to "Seat
Booking Agent"`` checks the event, by the agent's name, which is what a reader of the feature knows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fabtest.conversation import Turn
from fabtest.engine.checks import Result

__all__ = ["KIND", "NOT_KIND", "check_handoff", "evaluate", "handoffs_of"]

KIND, NOT_KIND = "hand_off", "not_hand_off"


def handoffs_of(turns: Iterable[Turn]) -> list[dict[str, Any]]:
    """The handoffs the turns' metadata records, in order."""
    found: list[dict[str, Any]] = []
    for turn in turns:
        events = turn.response.metadata.get("handoffs")
        if isinstance(events, list):
            found.extend(dict(e) for e in events if isinstance(e, Mapping) and isinstance(e.get("to"), str))
    return found


def _shown(events: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{e.get('from') or '?'} -> {e['to']}" for e in events) or "no handoff"


def check_handoff(events: Sequence[Mapping[str, Any]], target: str | None) -> Result:
    """Whether a handoff to ``target`` (any handoff when None) is among ``events``, with what was seen."""
    hit = [e for e in events if target is None or e["to"] == target]
    wanted = f'a handoff to "{target}"' if target else "a handoff"
    if hit:
        return True, f"{wanted}: {_shown(hit)}"
    return False, f"{wanted} was expected; the handoffs: {_shown(events)}"


def evaluate(kind: str, data: Mapping[str, Any], turns: Sequence[Turn]) -> Result | None:
    """Run a recorded handoff check again on ``turns`` (``fabtest replay``); None when not one of ours."""
    if kind not in (KIND, NOT_KIND):
        return None
    target = data.get("agent")
    passed, details = check_handoff(handoffs_of(turns), target if isinstance(target, str) else None)
    return passed == (kind == KIND), details
