"""The PydanticAI adapter on the real framework, with PydanticAI's own FunctionModel and a tool that runs."""

from __future__ import annotations

from typing import Any

import pytest

from fabtest.errors import UsageError

from .helpers import build, provide, require, say

require("pydantic_ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402


def _model(seen: list[list[ModelMessage]]) -> FunctionModel:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart(f"{returned[0].content['item']} costs {returned[0].content['usd']}")])
        asked = str(messages[-1].parts[-1].content)
        if "tea" in asked:
            return ModelResponse(parts=[ToolCallPart("price", {"item": "tea"})])
        return ModelResponse(parts=[TextPart(f"you said: {asked}")])

    return FunctionModel(reply, model_name="gemini-2.5-flash")


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[list[ModelMessage]]:
    requests: list[list[ModelMessage]] = []
    agent = Agent(_model(requests), name="shop")

    @agent.tool_plain
    def price(item: str) -> dict[str, Any]:
        return {"item": item, "usd": 3}

    provide(monkeypatch, "pai_shop", agent=agent, build=lambda: agent, not_an_agent=object())
    return requests


def test_a_turn_maps_the_tool_call_its_return_the_usage_and_the_model(seen: list[list[ModelMessage]]) -> None:
    response, reported = say(build("pydantic_ai", "pai_shop:agent"), "how much is tea?")
    [call] = response.tool_calls
    assert (call.name, call.arguments, call.result) == ("price", {"item": "tea"}, {"item": "tea", "usd": 3})
    assert reported == response.tool_calls and response.text == "tea costs 3"
    usage = response.metadata["usage"]
    assert usage["calls"] == 2 and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert response.metadata["model"] == "gemini-2.5-flash"


def test_each_scenario_has_its_own_history_kept_across_its_turns(seen: list[list[ModelMessage]]) -> None:
    first = build("pydantic_ai", "pai_shop:build")
    say(first, "how much is tea?")
    say(first, "how much is tea?", "tea costs 3", "thanks")
    # the second turn's model input held the first turn, tool call and return included
    assert any(isinstance(p, ToolReturnPart) for m in seen[-1] for p in m.parts)
    say(build("pydantic_ai", "pai_shop:agent"), "hello")  # another scenario: a fresh history
    assert len(seen[-1]) == 1


def test_a_conversation_it_did_not_have_is_rebuilt_from_the_text(seen: list[list[ModelMessage]]) -> None:
    response, _ = say(build("pydantic_ai", "pai_shop:agent"), "earlier", "an answer", "now")
    assert response.text == "you said: now"
    texts = [p.content for m in seen[-1] for p in m.parts if isinstance(p, (UserPromptPart, TextPart))]
    assert texts == ["earlier", "an answer", "now"]
    assert isinstance(seen[-1][0], ModelRequest) and isinstance(seen[-1][1], ModelResponse)


def test_the_table_model_prices_the_turn_and_a_wrong_object_is_named(seen: list[list[ModelMessage]]) -> None:
    response, _ = say(build("pydantic_ai", "pai_shop:agent", model="my-model"), "hello")
    assert response.metadata["model"] == "my-model"
    with pytest.raises(UsageError, match=r"expected a pydantic_ai\.Agent, got builtins\.object: point the table at"):
        build("pydantic_ai", "pai_shop:not_an_agent")
