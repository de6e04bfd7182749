"""ADK's weather-team tutorial run as written (issue 40 item 1): the table's ``context`` factory
seeds the session state the weather tool reads, the state after the turn is the end state, a
transfer to a sub-agent is a handoff event, and the ``@fabtest.tool`` whose ``tool_context`` ADK
injects is recorded once. The fixture agent is tests/frameworks/published/weather_team.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fabtest.agents.base import agent_metadata
from fabtest.conversation import Message
from fabtest.engine import end_state
from fabtest.engine.turns import call_agent
from fabtest.errors import UsageError
from fabtest.testing import FakeGemini

from .helpers import build, provide, require

require("adk")

SPEC = "frameworks.published.weather_team"


@pytest.fixture(scope="module", autouse=True)
def fake() -> Iterator[FakeGemini]:
    """One FakeGemini for the module: ADK's Gemini model keeps the client (and its address) it made
    first, and the fixture's agents are module globals."""
    with FakeGemini() as server, pytest.MonkeyPatch.context() as patch:
        for name, value in server.env().items():
            patch.setenv(name, value)
        patch.delenv("GOOGLE_API_KEY", raising=False)
        _script(server)
        yield server


def _script(fake: FakeGemini) -> None:
    fake.add_rule(r"Greet the user with say_hello", text="Hello there!")  # the greeting agent, once transferred to
    fake.add_tool_script(r"weather in London", [{"name": "get_weather_stateful", "args": {"city": "London"}},
                                                lambda req: req.function_responses[-1]["response"]["report"]])
    fake.add_tool_script(r"^Hello", [{"name": "transfer_to_agent", "args": {"agent_name": "greeting_agent"}}])


def test_the_context_seeds_the_state_the_tool_reads_and_writes() -> None:
    agent = build("adk", f"{SPEC}:root_agent", context=f"{SPEC}:initial_state")
    response = call_agent(agent, [Message("user", "What is the weather in London?")], timeout=30)
    [call] = response.tool_calls  # once, without the ToolContext
    assert (call.name, call.arguments) == ("get_weather_stateful", {"city": "London"})
    assert response.text == "London: 59 degrees Fahrenheit"
    state = end_state.read_state(agent, where="f:1")
    assert state == {"user_preference_temperature_unit": "Fahrenheit", "last_city_checked_stateful": "London"}


def test_a_transfer_to_a_sub_agent_is_a_handoff() -> None:
    agent = build("adk", f"{SPEC}:root_agent")
    response = call_agent(agent, [Message("user", "Hello")], timeout=30)
    assert [c.name for c in response.tool_calls] == ["transfer_to_agent"]
    assert response.metadata["handoffs"] == [{"from": "weather_agent_v2", "to": "greeting_agent",
                                              "tool": "transfer_to_agent"}]
    assert response.text == "Hello there!"
    meta = agent_metadata(agent)
    assert meta["agents"] == ["weather_agent_v2", "greeting_agent", "farewell_agent"]
    assert agent.stubbable_tools() == ["get_weather_stateful"]


def test_a_context_that_is_not_a_dict_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    provide(monkeypatch, "adk_bad_context", make=lambda: ["not", "a", "dict"])
    agent = build("adk", f"{SPEC}:root_agent", context="adk_bad_context:make")
    with pytest.raises(UsageError, match=r"^[^\n]*context factory returned list: ADK's session state is a dict"):
        call_agent(agent, [Message("user", "Hello")], timeout=30)
