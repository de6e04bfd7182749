"""Adapters for Python agents: an object with ``chat`` or a plain ``f(messages)`` callable."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from fabtest.agents.aio import is_async_callable
from fabtest.agents.base import OnToolCall
from fabtest.agents.boundary import accepts_keyword, coerce_response
from fabtest.conversation import AgentResponse, Message

__all__ = ["AsyncCallableAgent", "CallableAgent", "callable_agent", "coerce_response", "is_factory_callable"]


class CallableAgent:
    """Wraps ``f(messages) -> str | AgentResponse`` as an agent."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self._func = func
        self._wants_callback = accepts_keyword(func, "on_tool_call")

    def chat(self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        if self._wants_callback:
            return coerce_response(self._func(list(messages), on_tool_call=on_tool_call))
        return coerce_response(self._func(list(messages)))

    @property
    def func(self) -> Callable[..., Any]:
        """The function configured as the agent (a voice scenario calls it with the user's audio)."""
        return self._func

    def metadata(self) -> dict[str, Any]:
        return {"callable": f"{getattr(self._func, '__module__', '?')}:{getattr(self._func, '__qualname__', '?')}"}


class AsyncCallableAgent(CallableAgent):
    """Wraps ``async def f(messages) -> str | AgentResponse``; runs on the shared agent loop."""

    async def chat(  # type: ignore[override]  # the runner awaits an async chat
            self, messages: Sequence[Message], on_tool_call: OnToolCall | None = None) -> AgentResponse:
        if self._wants_callback:
            return coerce_response(await self._func(list(messages), on_tool_call=on_tool_call))
        return coerce_response(await self._func(list(messages)))


def callable_agent(func: Callable[..., Any]) -> CallableAgent:
    """The agent for a chat callable: :class:`AsyncCallableAgent` for an ``async def`` one."""
    return AsyncCallableAgent(func) if is_async_callable(func) else CallableAgent(func)


def is_factory_callable(func: Callable[..., Any]) -> bool:
    """A function whose first parameter is named ``context``/``ctx`` is a factory, not a chat callable."""
    params = _params(func)
    return bool(params) and params[0] in ("context", "ctx")


def _params(func: Callable[..., Any]) -> list[str]:
    try:
        return list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return []
