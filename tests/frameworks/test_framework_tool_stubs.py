"""``@fabtest.tool`` under a framework fabtest does not intercept: PydanticAI runs the decorated
function as its tool, so a scenario's stub answers it and the call is marked stubbed."""

from __future__ import annotations

from typing import Any

import pytest

import fabtest
from fabtest.agents.stubs import ToolStub, ToolStubs
from fabtest.conversation import Message
from fabtest.engine import stubbing
from fabtest.engine.turns import call_agent

from .helpers import build, provide, require

require("pydantic_ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

REAL: list[str] = []


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"price: {returned[0].content}")])
    return ModelResponse(parts=[ToolCallPart("price", {"item": "tea"})])


@pytest.fixture(autouse=True)
def shop(monkeypatch: pytest.MonkeyPatch) -> None:
    REAL.clear()
    agent = Agent(FunctionModel(_reply, model_name="gemini-2.5-flash"), name="shop")

    @agent.tool_plain
    @fabtest.tool
    def price(item: str) -> dict[str, Any]:
        """The price of an item."""
        REAL.append(item)
        return {"item": item, "usd": 3}

    provide(monkeypatch, "pai_stub_shop", agent=agent)


def _stubs(stub: ToolStub) -> ToolStubs:
    found = ToolStubs()
    found.define(stub)
    return found


def test_a_decorated_pydantic_ai_tool_is_stubbed() -> None:
    agent = build("pydantic_ai", "pai_stub_shop:agent")
    stubs = _stubs(ToolStub("price", "f:2", result={"item": "tea", "usd": 99}))
    stubbing.verify(stubs, agent)  # the registry names it
    response = call_agent(agent, [Message("user", "tea?")], timeout=30, tool_stubs=stubs)
    assert REAL == [] and response.text == "price: {'item': 'tea', 'usd': 99}"
    [call] = response.tool_calls
    assert (call.name, call.arguments, call.result, call.stubbed) == ("price", {"item": "tea"}, {"item": "tea", "usd": 99}, True)


def test_without_a_stub_the_real_tool_runs_and_is_recorded_once() -> None:
    agent = build("pydantic_ai", "pai_stub_shop:agent")
    response = call_agent(agent, [Message("user", "tea?")], timeout=30)
    assert REAL == ["tea"]
    [call] = response.tool_calls
    assert (call.name, call.result, call.stubbed) == ("price", {"item": "tea", "usd": 3}, False)
