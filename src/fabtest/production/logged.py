"""One logged conversation, whatever tool exported it: plain turns with their tool calls, timing and usage.

Every format reader (:mod:`fabtest.production.formats`) ends here, so scoring, import, the
incremental state and redaction see one shape. ``content_hash`` is what "already scored" means:
the same conversation id with other content (a session that went on) is scored again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from fabtest.conversation import AgentResponse, Conversation, ToolCall, Turn

__all__ = ["LoggedConversation", "LoggedTurn"]


@dataclass
class LoggedTurn:
    """A user message and everything the agent said and called until the next one."""

    user: str
    agent: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: the agent's latency for the turn as logged (span or observation times), seconds
    duration_s: float = 0.0
    #: ``{"model": ..., "usage": {"input_tokens", "output_tokens", "models": {...}}}`` as a test turn records it
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoggedConversation:
    """A conversation as logged: its id in the source, when it started, and where it was read."""

    id: str
    turns: list[LoggedTurn]
    #: ISO 8601 UTC of its first logged event ("" when the export has no time)
    timestamp: str = ""
    #: ``file`` or ``file:line`` it was read from, and the format's name
    source: str = ""
    format: str = ""

    def content_hash(self) -> str:
        """sha256 of the turns' text and tool calls: equal conversations hash alike, whatever the source."""
        body = [[t.user, t.agent, [[c.name, c.arguments, c.result] for c in t.tool_calls]] for t in self.turns]
        text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def conversation(self) -> Conversation:
        """The engine's conversation, which the checks and the judge read."""
        return Conversation(turns=[
            Turn(number, t.user, AgentResponse(t.agent, [ToolCall(c.name, dict(c.arguments), c.result, dict(c.metadata))
                                                         for c in t.tool_calls], dict(t.metadata)),
                 duration_s=t.duration_s)
            for number, t in enumerate(self.turns, start=1)])
