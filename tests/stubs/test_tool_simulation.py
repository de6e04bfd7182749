"""``is simulated as``: an LLM plays a tool, through the real google-genai client against FakeGemini.

The prompt is product code: these tests read the request the model received (what it is shown, in
what order) and check that the tool's earlier calls are carried into the next one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import fabtest
from fabtest.agents.stubs import ToolStub, ToolStubs, session
from fabtest.conversation import TokenUsage
from fabtest.engine.tool_simulation import TOOL_SYSTEM_PROMPT, ToolSimulator
from fabtest.llm.base import LLMSettings
from fabtest.llm.factory import build_llm
from fabtest.testing import FakeGemini, FakeLLM


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        yield server


def test_the_prompt_shows_the_description_the_earlier_calls_then_this_call(fake: FakeGemini) -> None:
    answers = iter([{"result": json.dumps([{"flight": "LH 100", "day": "Monday"}]), "error": None},
                    {"result": None, "error": "no flights on Sundays"}])
    fake.add_rule(r"THE TOOL", callback=lambda request: next(answers))
    charged: list[TokenUsage] = []
    simulator = ToolSimulator("search_flights", "a flight search over Lufthansa's schedule; no flights on Sundays",
                              build_llm(LLMSettings(base_url=fake.base_url, timeout_s=5.0, max_retries=0)),
                              charge=charged.append)
    first = simulator.answer({"day": "Monday"})
    second = simulator.answer({"day": "Sunday"})
    assert (first.result, first.is_error) == ([{"flight": "LH 100", "day": "Monday"}], False)
    assert (second.result, second.is_error) == ("no flights on Sundays", True)
    assert len(charged) == 2 and all(u.calls == 1 for u in charged)
    one, two = fake.requests
    assert one.system == TOOL_SYSTEM_PROMPT and one.wants_json
    assert "(none: this is its first call)" in one.prompt
    prompt = two.prompt
    order = [prompt.index(part) for part in (
        "search_flights: a flight search over Lufthansa's schedule; no flights on Sundays",
        'ITS EARLIER CALLS', '1. arguments: {"day": "Monday"} -> result: [{"day": "Monday", "flight": "LH 100"}]',
        "THIS CALL", 'arguments: {"day": "Sunday"}')]
    assert order == sorted(order), prompt


def test_a_simulated_stub_answers_a_decorated_tool_and_is_recorded() -> None:
    @fabtest.tool
    def search_flights(day: str) -> list:
        raise AssertionError("the real tool must not run")

    llm = FakeLLM().tool_results({"search_flights": [["LH 100"], ["LH 200"]]})
    stubs = ToolStubs()
    stubs.define(ToolStub("search_flights", "f:3", simulated=ToolSimulator(
        "search_flights", "flights", llm, charge=lambda usage: None)))
    with session(stubs) as recorded:
        assert search_flights("Monday") == ["LH 100"]
        assert search_flights(day="Tuesday") == ["LH 200"]
    assert [(c.arguments, c.result, c.stubbed) for c in recorded] == [
        ({"day": "Monday"}, ["LH 100"], True), ({"day": "Tuesday"}, ["LH 200"], True)]
    # the fake was asked as a tool, with this tool's earlier call
    assert [c.purpose for c in llm.calls] == ["tool", "tool"]
    assert llm.calls[1].tool == "search_flights" and llm.calls[1].tool_calls[0].arguments == {"day": "Monday"}

