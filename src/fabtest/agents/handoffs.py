"""What the framework adapters share about handoffs and about the tools fabtest can reach.

A handoff is recorded twice, as the framework shows it: the call that asked for it is one of the
turn's tool calls (the OpenAI Agents SDK's ``transfer_to_seat_booking_agent``, ADK's
``transfer_to_agent``), and the handoff itself is an event in the turn's metadata (``handoffs``:
``{"from", "to", "tool"}``), which ``Then the agent must hand off to "..."`` reads
(:mod:`fabtest.engine.handoffs`). The agents a system can hand off to are the adapter's
``agents`` metadata, so a misspelt agent in a step is an error with a "did you mean".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fabtest.agents.stubs import registered_tools
from fabtest.conversation import AgentResponse

__all__ = ["Handoffs", "reachable_tools"]


@dataclass
class Handoffs:
    """The handoffs of one turn, in order, and the agent that holds the conversation after them."""

    speaker: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    def handed(self, source: str | None, target: str, tool: str | None = None) -> None:
        self.events.append({"from": source or self.speaker, "to": target, **({"tool": tool} if tool else {})})
        self.speaker = target

    def spoke(self, agent: str | None) -> None:
        """An agent produced a message: a change of speaker with no event before it is a handoff
        (a LangGraph multi-agent graph names each ``AIMessage`` with its agent)."""
        if agent and self.speaker and agent != self.speaker:
            self.handed(self.speaker, agent)
        self.speaker = agent or self.speaker

    def attach(self, response: AgentResponse) -> AgentResponse:
        """The turn's handoffs in its metadata (written only when there was one)."""
        if self.events:
            response.metadata["handoffs"] = list(self.events)
        self.events = []
        return response


def reachable_tools(names: Iterable[str] | None) -> list[str]:
    """The agent's tools a stub or fault can reach in-process: those decorated with
    ``@fabtest.tool`` (every registered one when the agent's own list is not known)."""
    registered = registered_tools()
    if names is None:
        return registered
    return [name for name in names if name in registered]
