"""What the framework adapters' tests share: skipping without an extra, running a turn, building from a table."""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import Any

import pytest

from fabtest.agents import aio
from fabtest.agents.frameworks import FRAMEWORKS
from fabtest.agents.registry import make_agent
from fabtest.conversation import AgentResponse, Message, ToolCall


def require(key: str) -> None:
    """Skip the module when the framework's extra is not installed, naming the extra."""
    framework = FRAMEWORKS[key]
    module = {"adk": "google.adk", "langgraph": "langgraph", "openai_agents": "agents",
              "pydantic_ai": "pydantic_ai"}[key]
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        pytest.skip(f"needs the {framework.extra} extra: {framework.install}", allow_module_level=True)


def provide(monkeypatch: pytest.MonkeyPatch, module: str, **objects: Any) -> None:
    """Make ``module:NAME`` importable for a table, for this test only."""
    monkeypatch.setitem(sys.modules, module, types.SimpleNamespace(**objects))


def build(key: str, target: str, **options: Any) -> Any:
    """The agent a ``[tool.fabtest.agents.shop] <key> = target`` table builds for one scenario."""
    return make_agent({key: target, **options}, {"agent_name": "shop"}, where="pyproject.toml")


def say(agent: Any, *lines: str) -> tuple[AgentResponse, list[ToolCall]]:
    """One turn on fabtest's agent loop, as the runner runs it: ``lines`` are the conversation so far
    (user, agent, ..., user); returns the response and the calls reported through on_tool_call."""
    reported: list[ToolCall] = []
    messages: Sequence[Message] = [Message("user" if i % 2 == 0 else "agent", text) for i, text in enumerate(lines)]
    return aio.run(agent.chat(messages, on_tool_call=reported.append), timeout=60), reported
