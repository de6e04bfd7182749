"""The OpenAI Agents SDK adapter on the real SDK: its chat-completions model and the real openai client
talk to the OpenAI-compatible fake on 127.0.0.1 (tests/builtin_agent/fake_openai.py); the tool runs."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

import pytest
from builtin_agent.fake_openai import FakeOpenAI, message, tool_call

from fabtest.errors import UsageError

from .helpers import build, provide, require, say

require("openai_agents")

from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402


def _answer(body: dict[str, Any]) -> tuple[int, Any]:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return 200, message(f"tea costs {ast.literal_eval(last['content'])['usd']}", usage=(30, 5))
    if "tea" in str(last["content"]):
        return 200, message(None, [tool_call("call_1", "price", {"item": "tea"})], usage=(20, 4))
    return 200, message(f"you said: {last['content']}")


@function_tool
def price(item: str) -> dict[str, Any]:
    """The price of an item."""
    return {"item": item, "usd": 3}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    set_tracing_disabled(True)
    with FakeOpenAI(_answer) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)
        agent = Agent(name="shop", instructions="Sell tea.", tools=[price],
                      model=OpenAIChatCompletionsModel(model="gpt-4.1-mini", openai_client=client))
        provide(monkeypatch, "oa_shop", agent=agent, not_an_agent="agent")
        yield server


def test_a_turn_maps_the_run_items_usage_and_model(fake: FakeOpenAI) -> None:
    response, reported = say(build("openai_agents", "oa_shop:agent"), "how much is tea?")
    [call] = response.tool_calls
    assert (call.name, call.arguments, call.result) == ("price", {"item": "tea"}, {"item": "tea", "usd": 3})
    assert call.metadata["id"] == "call_1" and reported == response.tool_calls
    assert response.text == "tea costs 3"
    assert response.metadata["usage"] == {"calls": 2, "input_tokens": 50, "output_tokens": 9}
    assert response.metadata["model"] == "gpt-4.1-mini"


def test_each_scenario_has_its_own_session_kept_across_its_turns(fake: FakeOpenAI) -> None:
    agent = build("openai_agents", "oa_shop:agent")
    say(agent, "how much is tea?")
    say(agent, "how much is tea?", "tea costs 3", "thanks")
    assert [m["role"] for m in fake.requests[-1]["messages"]] == ["system", "user", "assistant", "tool",
                                                                  "assistant", "user"]
    say(build("openai_agents", "oa_shop:agent"), "hello")
    assert [m["role"] for m in fake.requests[-1]["messages"]] == ["system", "user"]


def test_a_conversation_it_did_not_have_is_rebuilt_from_the_text(fake: FakeOpenAI) -> None:
    response, _ = say(build("openai_agents", "oa_shop:agent"), "earlier", "an answer", "now")
    assert response.text == "you said: now"
    assert [m.get("content") for m in fake.requests[-1]["messages"][1:]] == ["earlier", "an answer", "now"]


def test_a_non_agent_is_named(fake: FakeOpenAI) -> None:
    with pytest.raises(UsageError, match=r"^[^\n]*expected an agents\.Agent, got builtins\.str"):
        build("openai_agents", "oa_shop:not_an_agent")
