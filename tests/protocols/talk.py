"""A scenario's conversation with a protocol agent built from its table, turn by turn as the runner hands
the messages over (decisions on the user's message, pauses on the agent's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fabtest.agents import aio
from fabtest.agents.registry import make_agent
from fabtest.conversation import AgentResponse, Attachment, Decision, Message, ToolCall


class Conversation:
    """One scenario's agent (built from ``table``) and the messages so far."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        self.agent = make_agent(dict(table), {"agent_name": "agent"}, where="pyproject.toml")
        self.messages: list[Message] = []
        self.reported: list[ToolCall] = []  # what the adapter reported through on_tool_call

    def say(self, text: str, *files: Attachment, decisions: Sequence[Decision] = ()) -> AgentResponse:
        self.messages.append(Message("user", text, files, decisions=tuple(decisions)))
        response: AgentResponse = aio.run(self.agent.chat(self.messages, on_tool_call=self.reported.append),
                                          timeout=30)
        self.messages.append(Message("agent", response.text, tuple(response.attachments),
                                     pauses=tuple(response.pauses)))
        return response

    def close(self) -> None:
        aio.run(self.agent.aclose(), timeout=10)
