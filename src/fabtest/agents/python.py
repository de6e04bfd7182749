"""Adapters for Python agents: an object with ``chat`` or a plain ``f(messages)`` callable."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from fabtest.agents.base import AgentError, OnToolCall
from fabtest.conversation import AgentResponse, Message


class CallableAgent:
    """Wraps ``f(messages) -> str | AgentResponse`` as an agent."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self._func = func
        self._wants_callback = _accepts(func, "on_tool_call")

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        if self._wants_callback:
            return coerce_response(self._func(list(messages), on_tool_call=on_tool_call))
        return coerce_response(self._func(list(messages)))

    def metadata(self) -> dict[str, Any]:
        return {"callable": f"{getattr(self._func, '__module__', '?')}:{getattr(self._func, '__qualname__', '?')}"}


def coerce_response(value: Any) -> AgentResponse:
    """Accept an AgentResponse or a plain string; anything else is an agent error, not a crash later."""
    if isinstance(value, AgentResponse):
        if not isinstance(value.text, str):
            raise AgentError(f"agent returned AgentResponse with non-string text: {type(value.text).__name__}")
        return value
    if isinstance(value, str):
        return AgentResponse(text=value)
    hint = ""
    if hasattr(value, "chat"):
        hint = (" (it looks like an agent: if this function is a factory, name its first parameter"
                " `context` so fabtest calls it once per scenario)")
    raise AgentError(f"agent returned {type(value).__name__} ({_short(value)}); expected str or AgentResponse{hint}")


def is_factory_callable(func: Callable[..., Any]) -> bool:
    """A function whose first parameter is named ``context``/``ctx`` is a factory, not a chat callable."""
    params = _params(func)
    return bool(params) and params[0] in ("context", "ctx")


def _params(func: Callable[..., Any]) -> list[str]:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return []


def _accepts(func: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
