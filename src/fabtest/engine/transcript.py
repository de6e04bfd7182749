"""A conversation as text: the one rendering every front end shows and judges.

Two views of the same turns, kept side by side so they cannot drift apart:

- :func:`render`: what a person reads under a failed scenario or playbook (numbered turns, the
  topic, the tools called; very long replies clipped)::

      Turn 1  [topic: greeting]
        user:  Hi, I need a room
        agent: Which city?
        tools: search_venues(city='Berlin')

- :func:`for_judge`: what the judge reads for a whole-conversation criterion (``User:`` /
  ``Agent:`` lines, plus each turn's tool calls with their arguments).
"""

from __future__ import annotations

import json

from fabtest.conversation import Conversation
from fabtest.engine.checks import describe_calls

__all__ = ["for_judge", "render"]

#: replies longer than this are clipped in :func:`render` (the result JSON keeps them whole)
CLIP = 2000


def render(conversation: Conversation, *, clip: int = CLIP) -> str:
    """The whole conversation for a person, shown under a failure like captured output."""
    lines: list[str] = []
    if conversation.history:  # Given the conversation so far: what the agent was sent before turn 1
        lines.append("Seeded history")
        lines += [f"  {m.role + ':':6} {_clip(m.content, clip)}" for m in conversation.history]
    for turn in conversation.turns:
        topic = f"  [topic: {turn.topic}]" if turn.topic else ""
        lines.append(f"Turn {turn.number}{topic}")
        lines.append(f"  user:  {_clip(turn.user, clip)}")
        lines.append(f"  agent: {_clip(turn.response.text, clip)}")
        if turn.tool_calls:
            lines.append(f"  tools: {describe_calls(turn.tool_calls)}")
    return "\n".join(lines)


def for_judge(conversation: Conversation) -> str:
    """The transcript the judge reads, with every tool call and its arguments (a playbook's
    ``llm_checks`` may be about what the agent did, not only what it said)."""
    lines: list[str] = []
    for turn in conversation.turns:
        lines.append(f"User: {turn.user}")
        lines.append(f"Agent: {turn.response.text}")
        if turn.tool_calls:
            lines.append("(Agent called tools: " + ", ".join(f"{c.name}({_json(c.arguments)})"
                                                             for c in turn.tool_calls) + ")")
    return "\n".join(lines)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters]"
