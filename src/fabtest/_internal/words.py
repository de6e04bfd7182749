"""English for messages built from names: the article before a name ("a LangGraph agent", "an
OpenAI Agents SDK agent", "an int"). One function, so a name with its own article ("the OpenAI
Agents SDK") or a vowel ("a int") never reads wrong in one message and right in another."""

from __future__ import annotations

__all__ = ["article"]


def article(noun: str) -> str:
    """``noun`` with "a" or "an" before it, by its first letter (names here start with a letter whose
    sound it gives: OpenAI, int, object, ADK; "u" is left to "a", as in "a user")."""
    return f"{'an' if noun[:1].lower() in 'aeio' else 'a'} {noun}"
