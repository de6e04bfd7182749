"""Adapters for Python agents: an object with ``chat`` or a plain ``f(messages)`` callable."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from fabtest.agents.base import OnToolCall
from fabtest.agents.boundary import accepts_keyword, coerce_response
from fabtest.conversation import AgentResponse, Message

__all__ = ["CallableAgent", "coerce_response", "is_factory_callable"]


class CallableAgent:
    """Wraps ``f(messages) -> str | AgentResponse`` as an agent."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self._func = func
        self._wants_callback = accepts_keyword(func, "on_tool_call")

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        if self._wants_callback:
            return coerce_response(self._func(list(messages), on_tool_call=on_tool_call))
        return coerce_response(self._func(list(messages)))

    def metadata(self) -> dict[str, Any]:
        return {"callable": f"{getattr(self._func, '__module__', '?')}:{getattr(self._func, '__qualname__', '?')}"}


def is_factory_callable(func: Callable[..., Any]) -> bool:
    """A function whose first parameter is named ``context``/``ctx`` is a factory, not a chat callable."""
    params = _params(func)
    return bool(params) and params[0] in ("context", "ctx")


def _params(func: Callable[..., Any]) -> list[str]:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return []
