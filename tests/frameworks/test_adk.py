"""The ADK adapter on the real ADK: its Gemini model and the real google-genai client talk to FakeGemini
on 127.0.0.1; the tool is a Python function ADK runs."""

from __future__ import annotations

from typing import Any

import pytest

from fabtest.errors import UsageError
from fabtest.testing import FakeGemini

from .helpers import build, provide, require, say

require("adk")

from google.adk.agents import LlmAgent  # noqa: E402


def price(item: str) -> dict[str, Any]:
    """The price of an item."""
    return {"item": item, "usd": 3}


@pytest.fixture(autouse=True)
def shop(fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.add_tool_script(r"tea", [{"name": "price", "args": {"item": "tea"}},
                                  lambda req: "tea costs {usd}".format(**req.function_responses[-1]["response"])])
    fake.add_rule(r".", text="hello back")
    agent = LlmAgent(name="shop", model="gemini-2.5-flash", instruction="Sell tea.", tools=[price])
    provide(monkeypatch, "adk_shop", root_agent=agent, build=lambda: agent, not_an_agent=price)


def test_a_turn_maps_the_events_calls_responses_usage_and_model(fake: FakeGemini) -> None:
    response, reported = say(build("adk", "adk_shop:root_agent"), "how much is tea?")
    [call] = response.tool_calls
    assert (call.name, call.arguments, call.result) == ("price", {"item": "tea"}, {"item": "tea", "usd": 3})
    assert reported == response.tool_calls and response.text == "tea costs 3"
    assert "Sell tea." in fake.requests[0].system
    usage = response.metadata["usage"]
    assert usage["calls"] == 2 and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert response.metadata["model"] == "gemini-2.5-flash"


def test_each_scenario_has_its_own_session_kept_across_its_turns(fake: FakeGemini) -> None:
    agent = build("adk", "adk_shop:build")
    say(agent, "how much is tea?")
    second, _ = say(agent, "how much is tea?", "tea costs 3", "thanks")
    assert any("functionResponse" in p for c in fake.requests[-1].contents for p in c["parts"])
    other, _ = say(build("adk", "adk_shop:root_agent"), "hello")
    assert len(fake.requests[-1].contents) == 1
    assert other.metadata["session_id"] != second.metadata["session_id"]


def test_a_conversation_it_did_not_have_is_rebuilt_from_the_text(fake: FakeGemini) -> None:
    response, _ = say(build("adk", "adk_shop:root_agent"), "earlier", "an answer", "now")
    assert response.text == "hello back"
    contents = fake.requests[-1].contents
    assert [(c["role"], c["parts"][0]["text"]) for c in contents] == [("user", "earlier"), ("model", "an answer"),
                                                                      ("user", "now")]


def test_a_non_agent_is_named(fake: FakeGemini) -> None:
    with pytest.raises(UsageError, match=r"^[^\n]*expected an ADK agent .*, got builtins\.function"):
        build("adk", "adk_shop:not_an_agent")
