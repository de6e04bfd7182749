"""A recorded conversation as a scripted ``.feature``: its user lines replayed, its tool calls asserted.

The feature is a regression test to edit, not a verdict: every tool call the agent made is a
``must call ... with:`` step (what the agent did is what it must keep doing), and the quality of
the replies is left to a ``should`` criterion the author writes (a commented placeholder), since
what made the recorded answer good or bad is the author's judgement. Text that a Gherkin line
cannot hold (double quotes, newlines) goes into a doc string; table cells escape ``|`` and ``\\``.
"""

from __future__ import annotations

import json
from typing import Any

from fabtest.authoring.transcripts import RecordedConversation

__all__ = ["feature_text"]

_FORMAT_NAMES = {"fabtest": "a fabtest experiment", "openai": "OpenAI chat messages",
                 "gemini": "Gemini contents", "messages": "a list of messages"}


def feature_text(conversation: RecordedConversation, *, source: str, agent: str | None = None) -> str:
    """The feature file's text for ``conversation`` (read from ``source``)."""
    name = _line(conversation.name) or "Imported conversation"
    lines = [f"# Imported by `fabtest import` from {_line(source)} ({_FORMAT_NAMES[conversation.source_format]})."]
    if conversation.origin:
        lines.append(f"# {_line(conversation.origin)}.")
    lines += ["# The user's lines are replayed as they were; the agent's tool calls are asserted as they happened.",
              "@regression @imported",
              f"Feature: {name}",
              "",
              f"  Scenario: {name}"]
    if agent:
        lines.append(f'    Given the agent "{agent}"')
    for turn in conversation.turns:
        lines += _user_step(turn.user)
        for call in turn.tool_calls:
            lines += _call_step(call.name, call.arguments)
    lines += ["    # What must a good answer do here? Write the criterion, then uncomment:",
              '    # Then the conversation should satisfy "<what a good conversation does>"', ""]
    return "\n".join(lines)


def _line(text: str) -> str:
    return " ".join(str(text).split())


def _user_step(text: str) -> list[str]:
    if '"' not in text and "\n" not in text and text == text.strip() and text:
        return [f'    When the user says "{text}"']
    body = [("      " + line if line else "") for line in text.replace('"""', '\\"\\"\\"').split("\n")]
    return ["    When the user says:", '      """', *body, '      """']


def _call_step(tool: str, arguments: dict[str, Any]) -> list[str]:
    rows = [(name, cell) for name, value in arguments.items() if (cell := _value(value)) is not None]
    if not rows:
        return [f'    Then the agent must call "{tool}"']
    width = max(len("argument"), *(len(_cell(n)) for n, _ in rows))
    lines = [f'    Then the agent must call "{tool}" with:', f"      | {'argument'.ljust(width)} | value |"]
    lines += [f"      | {_cell(name).ljust(width)} | {_cell(value)} |" for name, value in rows]
    return lines


def _value(value: Any) -> str | None:
    """The ``with:`` cell that matches ``value`` exactly, or None when a cell cannot say it (the row
    is left out rather than asserting something the agent never sent)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False)
    if "\n" in value or not value.strip() or value != value.strip():
        return None
    if (value.startswith("/") and value.endswith("/")) or value[:1] in "<>=!":
        return None  # would read as a regex or a comparison
    return value


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|")
