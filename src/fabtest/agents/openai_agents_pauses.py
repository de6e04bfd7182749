"""OpenAI Agents SDK tool approvals as fabtest pauses (docs/how-to/approvals.md).

A function tool with ``needs_approval`` stops the run: ``result.interruptions`` holds one
``ToolApprovalItem`` per call waiting. Each becomes an approval pause (the call's name,
arguments and ``call_id``); the run's state (``result.to_state()``) waits with them until the
user's decisions arrive, which are applied with ``state.approve(item)`` /
``state.reject(item, rejection_message=reason)`` before ``Runner.run`` resumes the state. The
SDK approves a call only as the model made it, so an edited approval is refused in one line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fabtest.agents.base import AgentError, each_decided
from fabtest.conversation import Decision, Pause

__all__ = ["Waiting", "pauses_of"]


def pauses_of(interruptions: Sequence[Any]) -> list[Pause]:
    """One approval pause per ``ToolApprovalItem``, identified by its call id."""
    out = []
    for i, item in enumerate(interruptions):
        raw = getattr(item, "raw_item", None)
        arguments = getattr(item, "arguments", None) or getattr(raw, "arguments", None) or "{}"
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        except (ValueError, TypeError):
            parsed = {"input": arguments}
        name = getattr(item, "tool_name", None) or getattr(raw, "name", None) or "tool"
        out.append(Pause(tool=str(name), arguments=parsed if isinstance(parsed, dict) else {"input": parsed},
                         id=str(getattr(item, "call_id", None) or f"approval-{i + 1}"), kind="approval"))
    return out


@dataclass
class Waiting:
    """A run stopped for approval: its state and the items the decisions are applied to."""

    state: Any
    items: list[Any]
    pauses: list[Pause] = field(default_factory=list)

    def decide(self, decisions: Sequence[Decision]) -> set[str]:
        """Apply the decisions to the state; returns the call ids the user rejected (calls never made)."""
        rejected: set[str] = set()
        decided = each_decided(self.pauses, decisions,
                               waits_on=f"the OpenAI Agents SDK run waits on {len(self.pauses)} approvals")
        for (pause, decision), item in zip(decided, self.items, strict=True):
            if decision.decision == "edited":
                raise AgentError(f"the OpenAI Agents SDK approves a call only as the model made it "
                                 f"(state.approve takes no arguments): {pause.describe()} cannot be approved with "
                                 "edited arguments; use When the user approves or rejects")
            if decision.approved:
                self.state.approve(item)
            else:
                self.state.reject(item, rejection_message=decision.reason or decision.answer or None)
                rejected.add(pause.id)
        return rejected
