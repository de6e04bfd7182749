"""A recorded conversation as plain turns: what every reader of ``fabtest import`` builds.

The readers of chat formats (:mod:`fabtest.authoring.transcripts`) and of the frameworks' saved
histories (:mod:`fabtest.authoring.framework_transcripts`) fill :class:`Turns` message by message
and share the parsing of message text, tool arguments and tool results, so a result reads the
same whichever format it came from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabtest.conversation import Attachment, Decision, Pause, ToolCall, json_or_text
from fabtest.errors import UsageError

__all__ = ["RecordedConversation", "RecordedTurn", "Turns", "message_text", "tool_arguments", "tool_result"]


@dataclass
class RecordedTurn:
    user: str
    agent: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: the files sent with the user's message (OpenAI ``image_url`` / ``file`` parts with a ``data:`` URI,
    #: Gemini ``inlineData`` parts); a file given only by URL or id has no bytes here and is left out
    files: list[Attachment] = field(default_factory=list)
    #: the pauses the agent ended the turn on (a fabtest experiment records them), and the user's
    #: decisions on the pauses of the turn before, which this turn's message carried
    pauses: list[Pause] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)


@dataclass
class RecordedConversation:
    name: str
    source_format: str
    turns: list[RecordedTurn]
    #: where it came from, for the feature's comment ("exp_ab12 run 3 of 'Book a room'")
    origin: str = ""
    #: messages left out: system prompts, agent messages before the first user message
    skipped: int = 0


class Turns:
    """Builds turns from messages in order: a user message opens a turn, the agent's fill it."""

    def __init__(self) -> None:
        self.turns: list[RecordedTurn] = []
        self.skipped = 0

    def user(self, text: str, files: Iterable[Attachment] = ()) -> None:
        self.turns.append(RecordedTurn(user=text, files=list(files)))

    def agent(self, text: str, calls: Iterable[ToolCall] = ()) -> None:
        if not self.turns:
            self.skipped += 1
            return
        turn = self.turns[-1]
        if text:
            turn.agent = f"{turn.agent}\n{text}" if turn.agent else text
        turn.tool_calls.extend(calls)


def message_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def tool_arguments(raw: Any, path: Path) -> dict[str, Any]:
    """A tool call's arguments: JSON text or an object; text that is not JSON is one line naming the file."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise UsageError(f"{path}: a tool call's arguments are not JSON: {raw[:80]!r}") from None
    return dict(raw) if isinstance(raw, Mapping) else {}


def tool_result(raw: Any) -> Any:
    """A tool result: JSON text parsed when it is JSON, else as it is."""
    return json_or_text(raw)
    return raw
